// A vSphere control-plane node: a VM cloned from the node's template into the resource
// pool, datastore and (optionally) host of its failure domain, with cloud-init user data
// and metadata in guestinfo (cloud-init's VMware datasource, which also wipes them from
// guestinfo once read), and the shared tail (infra/providers/cloud-node.ts). The DRS
// anti-affinity rule over all nodes is VsphereControlPlaneAntiAffinity (anti-affinity.ts).
import * as pulumi from "@pulumi/pulumi";
import { keepalivedCommand } from "../../vip/keepalived-command";
import { renderGuestinfoMetadata } from "./network";
import {
  cloudInitUserData,
  keepFirstBootData,
  nodeTags,
  settingForDomain,
  type CloudControlPlaneNodeArgs,
} from "../cloud-common";
import { CloudControlPlaneNode } from "../cloud-node";
import {
  VSPHERE_TOKENS,
  VsphereDrsVmOverride,
  VsphereVirtualMachine,
  invoke,
  type Lookup,
  type TemplateLookup,
} from "./bindings";
import type { VsphereNodeSettings } from "./config";

export type VsphereControlPlaneNodeArgs = CloudControlPlaneNodeArgs<VsphereNodeSettings>;

export { renderGuestinfoMetadata };

function base64(s: string): string {
  return Buffer.from(s).toString("base64");
}

export class VsphereControlPlaneNode extends CloudControlPlaneNode {
  readonly vm: VsphereVirtualMachine;
  /** Managed object id of the node's compute cluster (for the anti-affinity rule). */
  readonly computeClusterId: pulumi.Output<string>;
  readonly computeClusterName: string;

  constructor(name: string, args: VsphereControlPlaneNodeArgs, opts?: pulumi.ComponentResourceOptions) {
    super("molt:vsphere:ControlPlaneNode", name, {}, opts);
    const { node, settings: s } = args;
    const domain = settingForDomain(node, s.failureDomains, "vSphere placement");
    const dc = invoke<Lookup>(VSPHERE_TOKENS.getDatacenter, { name: s.datacenter }, this);
    const datacenterId = dc.id;
    const cluster = invoke<Lookup & { resourcePoolId: string }>(
      VSPHERE_TOKENS.getComputeCluster,
      { name: domain.computeCluster, datacenterId },
      this,
    );
    const pool = invoke<Lookup>(
      VSPHERE_TOKENS.getResourcePool,
      { name: domain.resourcePool ?? `${domain.computeCluster}/Resources`, datacenterId },
      this,
    );
    const datastore = invoke<Lookup>(VSPHERE_TOKENS.getDatastore, { name: domain.datastore, datacenterId }, this);
    const network = invoke<Lookup>(
      VSPHERE_TOKENS.getNetwork,
      { name: domain.network ?? s.network, datacenterId },
      this,
    );
    const host = domain.host
      ? invoke<Lookup>(VSPHERE_TOKENS.getHost, { name: domain.host, datacenterId }, this)
      : undefined;
    const template = invoke<TemplateLookup>(VSPHERE_TOKENS.getVirtualMachine, { name: node.image, datacenterId }, this);
    this.computeClusterId = cluster.id;
    this.computeClusterName = domain.computeCluster;

    const userData = cloudInitUserData(node, args.ssh, args.hostKey);
    this.vm = new VsphereVirtualMachine(
      node.name,
      {
        name: node.name,
        annotation: Object.entries(nodeTags(node, args.bootstrap.clusterName ?? "kubernetes"))
          .map(([k, v]) => `${k}=${v}`)
          .join("\n"),
        resourcePoolId: pool.id,
        datastoreId: datastore.id,
        folder: s.folder,
        ...(host ? { hostSystemId: host.id } : {}),
        numCpus: s.numCpus,
        memory: s.memoryMiB,
        guestId: template.guestId,
        scsiType: template.scsiType,
        firmware: template.firmware,
        // Stable disk ids in the guest (vSphere CSI and etcd's disk need them).
        enableDiskUuid: true,
        networkInterfaces: [
          { networkId: network.id, adapterType: template.networkInterfaceTypes.apply((t) => t[0] ?? "vmxnet3") },
        ],
        disks: template.disks.apply((d) => {
          const first = d[0];
          if (!first) throw new Error(`template ${node.image} has no disk`);
          return [
            {
              label: "disk0",
              size: Math.max(s.diskGiB, first.size),
              thinProvisioned: first.thinProvisioned,
              eagerlyScrub: first.eagerlyScrub,
            },
          ];
        }),
        clone: { templateUuid: template.id },
        extraConfig: pulumi.secret(
          userData.apply((u) => ({
            "guestinfo.userdata": base64(u),
            "guestinfo.userdata.encoding": "base64",
            "guestinfo.metadata": base64(
              renderGuestinfoMetadata(
                node.name,
                node.address && s.staticAddresses ? { address: node.address, settings: s.staticAddresses } : undefined,
              ),
            ),
            "guestinfo.metadata.encoding": "base64",
          })),
        ),
        waitForGuestNetTimeout: s.guestNetTimeoutMinutes ?? 10,
        waitForGuestNetRoutable: true,
      },
      // The template makes the machine: a change means a new machine. Its guestinfo
      // (cloud-init with the host key and login) stays as it was at creation.
      { parent: this, replaceOnChanges: ["clone"], deleteBeforeReplace: false, ...keepFirstBootData(["extraConfig"]) },
    );

    if (domain.keepOnHost) {
      // Without this, a host pin is the initial placement only: DRS may move the VM.
      new VsphereDrsVmOverride(
        `${node.name}-drs-override`,
        { computeClusterId: cluster.id, virtualMachineId: this.vm.uuid, drsEnabled: false },
        { parent: this },
      );
    }

    // A static address is known before the clone and never changes (etcd's peer URL is built on it).
    const address = node.address ? pulumi.output(node.address) : this.vm.defaultIpAddress;
    this.completeNode(args, {
      privateAddress: address,
      sshHost: address,
      // The form the vSphere cloud provider gives Node.spec.providerID.
      providerId: pulumi.interpolate`vsphere://${this.vm.uuid}`,
      machineId: this.vm.uuid,
      dependsOn: [this.vm],
    });

    // API endpoint VIP: keepalived after kubeadm, over the connection pinned to the rotated
    // host key (kubeadm init does not need the endpoint: it talks to its own API server;
    // joins find the VIP on an existing node). Deleted first: the VIP is released before the reset.
    if (s.vip) {
      keepalivedCommand(
        `${node.name}-keepalived`,
        {
          connection: this.connection,
          vip: s.vip,
          node: { name: node.name, generation: node.generation, check: { kind: "apiserver", port: 6443 } },
          address,
          runMode: "systemd",
          install: args.bootstrap.install.source === "packages" ? "packages" : "image",
          machineId: this.vm.uuid,
          ...(args.seed ? { seed: { connection: args.seed, dependsOn: [] } } : {}),
        },
        { parent: this, dependsOn: [this.bootstrap] },
      );
    }
  }
}
