// Static addresses for vSphere nodes: cloud-init's VMware datasource reads a `network` key
// (netplan v2) from guestinfo.metadata, so the node comes up with the address molt chose
// for it (NodeEntry.address, from molt:vsphere.staticAddresses.pool) instead of DHCP. The
// address is fixed before the clone, so kubeadm, etcd's peer URL and keepalived know it
// from the start and it never changes under the member.
import { stringify } from "yaml";
import { inSubnet } from "../../../orchestrator/core/addresses";
import { isIPv4 } from "../../../orchestrator/core/addresses";

export interface VsphereStaticAddresses {
  /** Node addresses: single addresses and inclusive ranges ("10.0.0.11-10.0.0.19"). */
  pool: string[];
  prefixLength: number;
  gateway: string;
  nameservers?: string[];
  searchDomains?: string[];
}

/** netplan v2 for the VM's one NIC (matched by name: e* covers ens192, eth0, enp11s0). */
export function renderStaticNetwork(address: string, s: VsphereStaticAddresses): Record<string, unknown> {
  if (!isIPv4(address)) throw new Error(`static address ${JSON.stringify(address)} is not an IPv4 address`);
  if (!inSubnet(address, s.gateway, s.prefixLength))
    throw new Error(`static address ${address} is not in the gateway's network ${s.gateway}/${s.prefixLength}`);
  return {
    version: 2,
    ethernets: {
      primary: {
        match: { name: "e*" },
        dhcp4: false,
        dhcp6: false,
        addresses: [`${address}/${s.prefixLength}`],
        routes: [{ to: "0.0.0.0/0", via: s.gateway }],
        ...(s.nameservers?.length || s.searchDomains?.length
          ? {
              nameservers: {
                ...(s.nameservers?.length ? { addresses: s.nameservers } : {}),
                ...(s.searchDomains?.length ? { search: s.searchDomains } : {}),
              },
            }
          : {}),
      },
    },
  };
}

/**
 * cloud-init metadata for the VMware datasource; wipes the guestinfo user data once read.
 * With a static address, the node's network configuration rides along.
 */
export function renderGuestinfoMetadata(
  nodeName: string,
  network?: { address: string; settings: VsphereStaticAddresses },
): string {
  return stringify(
    {
      "instance-id": nodeName,
      "local-hostname": nodeName,
      ...(network ? { network: renderStaticNetwork(network.address, network.settings) } : {}),
      "cleanup-guestinfo": ["userdata", "vendordata"],
    },
    { lineWidth: 0 },
  );
}
