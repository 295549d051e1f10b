// An Azure control-plane node: a NIC in the control-plane subnet whose IP configuration
// sits in the API load balancer's backend pool (port 6443 rules live on the LB), and a
// VM from the node's image reference in the node's availability zone (or, in a region
// without zones, in the control plane's availability set), with cloud-init custom data
// carrying the pre-generated host key, and the shared tail (infra/providers/cloud-node.ts).
// Every resource is named after the node: a new image is a new node, never an in-place
// update.
//
// Azure's internal load balancers do not hairpin: a backend that connects to the frontend is
// never sent to itself. The node therefore reaches controlPlaneEndpoint's name at its own API
// server once it runs one (endpointRouting "local-apiserver", as Cluster API's Azure
// templates do), so `kubeadm init` and the kubelet never depend on the hairpin. A public
// frontend address (KubeOne's azurerm_lb) is reached through the node's outbound SNAT, which
// takes a flow back to the node itself; it cannot be mapped (an address), nor need it be.
import { isIP } from "node:net";
import type * as azure from "@pulumi/azure-native";
import { azureSdk } from "../sdk";
import * as pulumi from "@pulumi/pulumi";
import type { NodeEntry } from "../../../orchestrator/core/nodes";
import { cloudInitUserData, keepFirstBootData, nodeTags, type CloudControlPlaneNodeArgs } from "../cloud-common";
import { CloudControlPlaneNode } from "../cloud-node";
import { imageReference, type AzureNodeSettings } from "./config";

/** Whether controlPlaneEndpoint's host is a DNS name, a public address or a private one. */
export function endpointAddressKind(endpoint: string): "name" | "public" | "private" {
  const host = (endpoint.startsWith("[") ? endpoint.slice(1, endpoint.indexOf("]")) : endpoint.replace(/:\d+$/, ""))
    .trim()
    .toLowerCase();
  const v = isIP(host);
  if (v === 0) return "name";
  if (v === 4) {
    const [a, b] = host.split(".").map(Number);
    const privateV4 =
      a === 10 ||
      a === 127 ||
      a === 0 ||
      (a === 172 && b >= 16 && b <= 31) ||
      (a === 192 && b === 168) ||
      (a === 169 && b === 254) ||
      (a === 100 && b >= 64 && b <= 127);
    return privateV4 ? "private" : "public";
  }
  // IPv6: loopback, unspecified, unique local (fc00::/7), link local (fe80::/10).
  return host === "::1" || host === "::" || /^f[cd]/.test(host) || /^fe[89ab]/.test(host) ? "private" : "public";
}

/** How a node reaches the endpoint: a name at its own API server; a public frontend address through the LB. */
export function endpointRoutingFor(endpoint: string): "local-apiserver" | "load-balancer" {
  return endpointAddressKind(endpoint) === "name" ? "local-apiserver" : "load-balancer";
}

export type AzureControlPlaneNodeArgs = CloudControlPlaneNodeArgs<AzureNodeSettings> & {
  /** The control plane's availability set (regions without zones; see AzureControlPlaneAvailabilitySet). */
  availabilitySetId?: pulumi.Input<string>;
};

function zoneOf(node: NodeEntry, zones: string[]): string[] {
  if (node.failureDomain === undefined) {
    if (zones.length > 0)
      throw new Error(`node ${node.name} has no failureDomain; this region has zones ${zones.join(", ")}`);
    return [];
  }
  if (!zones.includes(node.failureDomain)) {
    throw new Error(
      `node ${node.name} is in failure domain ${JSON.stringify(node.failureDomain)}, not one of the zones ` +
        `${zones.join(", ") || "(none)"}`,
    );
  }
  return [node.failureDomain];
}

export class AzureControlPlaneNode extends CloudControlPlaneNode {
  readonly vm: azure.compute.VirtualMachine;
  readonly nic: azure.network.NetworkInterface;

  constructor(name: string, args: AzureControlPlaneNodeArgs, opts?: pulumi.ComponentResourceOptions) {
    super("molt:azure:ControlPlaneNode", name, {}, opts);
    const { node, settings: s } = args;
    const zones = zoneOf(node, s.zones);
    const image = imageReference(node.image);
    const tags = { ...s.tags, ...nodeTags(node, args.bootstrap.clusterName ?? "kubernetes") };

    const sdk = azureSdk();
    this.nic = new sdk.network.NetworkInterface(
      `${node.name}-nic`,
      {
        resourceGroupName: s.resourceGroupName,
        location: s.location,
        networkInterfaceName: `${node.name}-nic`,
        enableAcceleratedNetworking: s.acceleratedNetworking ?? true,
        ...(s.networkSecurityGroupId ? { networkSecurityGroup: { id: s.networkSecurityGroupId } } : {}),
        ipConfigurations: [
          {
            name: "primary",
            primary: true,
            privateIPAllocationMethod: "Dynamic",
            subnet: { id: s.subnetId },
            loadBalancerBackendAddressPools: [{ id: s.apiBackendPoolId }],
          },
        ],
        tags,
      },
      { parent: this },
    );

    this.vm = new sdk.compute.VirtualMachine(
      node.name,
      {
        resourceGroupName: s.resourceGroupName,
        location: s.location,
        vmName: node.name,
        zones,
        ...(zones.length === 0 && args.availabilitySetId ? { availabilitySet: { id: args.availabilitySetId } } : {}),
        hardwareProfile: { vmSize: s.vmSize },
        storageProfile: {
          imageReference: image,
          osDisk: {
            name: `${node.name}-os`,
            createOption: "FromImage",
            deleteOption: "Delete",
            diskSizeGB: s.osDisk.sizeGiB,
            managedDisk: { storageAccountType: s.osDisk.storageAccountType ?? "Premium_LRS" },
          },
        },
        osProfile: {
          computerName: node.name,
          adminUsername: args.ssh.user,
          customData: cloudInitUserData(node, args.ssh, args.hostKey).apply((u) => Buffer.from(u).toString("base64")),
          linuxConfiguration: {
            disablePasswordAuthentication: true,
            ssh: { publicKeys: [{ path: `/home/${args.ssh.user}/.ssh/authorized_keys`, keyData: args.ssh.publicKey }] },
          },
        },
        networkProfile: { networkInterfaces: [{ id: this.nic.id, primary: true, deleteOption: "Delete" }] },
        tags,
      },
      // The image makes the machine: a change means a new machine. Its OS profile (custom
      // data with the host key, login user and key) stays as it was at creation, and so does
      // a zoneless VM's availability set (a VM joins one only when it is created: machines
      // made before molt added the set keep running outside it until they are rolled).
      {
        parent: this,
        replaceOnChanges: ["storageProfile.imageReference"],
        deleteBeforeReplace: false,
        ...keepFirstBootData(zones.length ? ["osProfile"] : ["osProfile", "availabilitySet"]),
      },
    );

    const privateAddress = this.nic.ipConfigurations.apply((c) => {
      const ip = c?.[0]?.privateIPAddress;
      if (!ip) throw new Error(`NIC of ${node.name} has no private address`);
      return ip;
    });
    this.completeNode(args, {
      privateAddress,
      sshHost: privateAddress,
      // The form the Azure cloud provider gives Node.spec.providerID ("azure://" + ARM id).
      providerId: pulumi.interpolate`azure://${this.vm.id}`,
      machineId: this.vm.vmId,
      dependsOn: [this.vm],
      endpointRouting: endpointRoutingFor(args.bootstrap.controlPlaneEndpoint),
    });
  }
}

export interface AzureControlPlaneAvailabilitySetArgs {
  clusterName: string;
  settings: AzureNodeSettings;
}

/**
 * In a region without availability zones, the control-plane VMs share one availability
 * set, so Azure spreads them over fault (rack, power) and update domains. Once per cluster.
 */
export class AzureControlPlaneAvailabilitySet extends pulumi.ComponentResource {
  readonly id: pulumi.Output<string>;

  constructor(name: string, args: AzureControlPlaneAvailabilitySetArgs, opts?: pulumi.ComponentResourceOptions) {
    super("molt:azure:ControlPlaneAvailabilitySet", name, {}, opts);
    const s = args.settings;
    const set = new (azureSdk().compute.AvailabilitySet)(
      `${name}-set`,
      {
        resourceGroupName: s.resourceGroupName,
        location: s.location,
        availabilitySetName: `${args.clusterName}-control-plane`,
        platformFaultDomainCount: s.faultDomainCount ?? 2,
        platformUpdateDomainCount: 5,
        // Managed disks need an aligned set.
        sku: { name: "Aligned" },
        tags: { ...s.tags, "molt.io/cluster": args.clusterName, "molt.io/role": "control-plane" },
      },
      { parent: this },
    );
    this.id = set.id;
    this.registerOutputs({ id: this.id });
  }
}
