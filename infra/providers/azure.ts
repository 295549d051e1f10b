// An Azure control-plane node: a NIC in the control-plane subnet whose IP configuration
// sits in the API load balancer's backend pool (port 6443 rules live on the LB), and a
// VM from the node's image reference in the node's availability zone, with cloud-init
// custom data carrying the pre-generated host key. Every resource is named after the
// node: a new image is a new node, never an in-place update.
import * as azure from "@pulumi/azure-native";
import * as pulumi from "@pulumi/pulumi";
import type { ControlPlaneNodeOutputs, NodeEntry } from "../node";
import { kubeadmBootstrapCommand } from "../kubeadm/bootstrap";
import type { ConnectionArgs, RemoteCommand } from "../remote/command";
import {
  cloudInitUserData,
  connectionOf,
  keepFirstBootData,
  nodeTags,
  type CloudControlPlaneNodeArgs,
} from "./cloud-common";

export interface AzureNodeSettings {
  resourceGroupName: pulumi.Input<string>;
  location: string;
  vmSize: string;
  /** Subnet of the control-plane NICs (one VNet subnet spans the zones of a region). */
  subnetId: pulumi.Input<string>;
  /** Backend address pool of the API load balancer (its rule forwards 6443). */
  apiBackendPoolId: pulumi.Input<string>;
  /** Network security group on the NICs, if not on the subnet. */
  networkSecurityGroupId?: pulumi.Input<string>;
  /** Availability zones a failureDomain may name ("1", "2", "3"); empty for regions without zones. */
  zones: string[];
  osDisk: {
    sizeGiB: number;
    /** Premium_LRS (default), PremiumV2_LRS, StandardSSD_LRS, ... */
    storageAccountType?: string;
  };
  /** Accelerated networking on the NIC (default true; needs a VM size that supports it). */
  acceleratedNetworking?: boolean;
  tags?: Record<string, string>;
}

export type AzureControlPlaneNodeArgs = CloudControlPlaneNodeArgs<AzureNodeSettings>;

/**
 * The node's image as an Azure image reference: a marketplace URN
 * "Publisher:Offer:Sku:Version" or the resource id of a (gallery) image version.
 */
export function imageReference(image: string): azure.types.input.compute.ImageReferenceArgs {
  if (image.startsWith("/")) return { id: image };
  const parts = image.split(":");
  if (parts.length !== 4 || parts.some((p) => p.length === 0)) {
    throw new Error(`image ${JSON.stringify(image)} is neither Publisher:Offer:Sku:Version nor an image resource id`);
  }
  if (parts[3] === "latest") {
    throw new Error(
      `image ${JSON.stringify(image)}: pin an exact version; "latest" would change the node's image behind molt's back`,
    );
  }
  const [publisher, offer, sku, version] = parts;
  return { publisher, offer, sku, version };
}

function zoneOf(node: NodeEntry, zones: string[]): string[] {
  if (node.failureDomain === undefined) {
    if (zones.length > 0)
      throw new Error(`node ${node.name} has no failureDomain; this region has zones ${zones.join(", ")}`);
    return [];
  }
  if (!zones.includes(node.failureDomain)) {
    throw new Error(
      `node ${node.name} is in failure domain ${JSON.stringify(node.failureDomain)}, not one of the zones ${zones.join(", ") || "(none)"}`,
    );
  }
  return [node.failureDomain];
}

export class AzureControlPlaneNode extends pulumi.ComponentResource implements ControlPlaneNodeOutputs {
  readonly privateAddress: pulumi.Output<string>;
  readonly sshHost: pulumi.Output<string>;
  readonly sshPort: pulumi.Output<number>;
  readonly hostPublicKey: pulumi.Output<string>;
  readonly providerId: pulumi.Output<string>;
  readonly vm: azure.compute.VirtualMachine;
  readonly nic: azure.network.NetworkInterface;
  /** kubeadm init/join on create, reset on delete. */
  readonly bootstrap: RemoteCommand;
  /** How molt (and a joining node's join material) reaches this node. */
  readonly connection: pulumi.Output<ConnectionArgs>;

  constructor(name: string, args: AzureControlPlaneNodeArgs, opts?: pulumi.ComponentResourceOptions) {
    super("molt:azure:ControlPlaneNode", name, {}, opts);
    const { node, settings: s } = args;
    const zones = zoneOf(node, s.zones);
    const image = imageReference(node.image);
    const tags = { ...s.tags, ...nodeTags(node, args.bootstrap.clusterName ?? "kubernetes") };

    this.nic = new azure.network.NetworkInterface(
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

    this.vm = new azure.compute.VirtualMachine(
      node.name,
      {
        resourceGroupName: s.resourceGroupName,
        location: s.location,
        vmName: node.name,
        zones,
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
      // data with the host key, login user and key) stays as it was at creation.
      {
        parent: this,
        replaceOnChanges: ["storageProfile.imageReference"],
        deleteBeforeReplace: false,
        ...keepFirstBootData(["osProfile"]),
      },
    );

    this.privateAddress = this.nic.ipConfigurations.apply((c) => {
      const ip = c?.[0]?.privateIPAddress;
      if (!ip) throw new Error(`NIC of ${node.name} has no private address`);
      return ip;
    });
    this.sshHost = this.privateAddress;
    this.sshPort = pulumi.output(args.ssh.port ?? 22);
    this.hostPublicKey = pulumi.output(args.hostKey.publicKey);
    // The form the Azure cloud provider gives Node.spec.providerID ("azure://" + ARM id).
    this.providerId = pulumi.interpolate`azure://${this.vm.id}`;

    this.connection = connectionOf(this, args);

    this.bootstrap = kubeadmBootstrapCommand(
      `${node.name}-kubeadm`,
      {
        node,
        ssh: args.ssh,
        hostKey: args.hostKey,
        settings: args.bootstrap,
        sshHost: this.sshHost,
        advertiseAddress: this.privateAddress,
        machineId: this.vm.vmId,
        joinMaterial: args.joinMaterial,
        seed: args.seed,
        joinedAlready: args.joinedAlready,
      },
      { parent: this, dependsOn: [this.vm, ...(args.after ? [args.after] : [])] },
    );

    this.registerOutputs({
      privateAddress: this.privateAddress,
      sshHost: this.sshHost,
      sshPort: this.sshPort,
      hostPublicKey: this.hostPublicKey,
      providerId: this.providerId,
    });
  }
}
