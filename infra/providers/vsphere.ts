// A vSphere control-plane node: a VM cloned from the node's template into the resource
// pool, datastore and (optionally) host of its failure domain, with cloud-init user data
// and metadata in guestinfo (cloud-init's VMware datasource, which also wipes them from
// guestinfo once read), plus a DRS anti-affinity rule that keeps control-plane VMs on
// different hosts (VsphereControlPlaneAntiAffinity, once per cluster).
//
// @pulumi/vsphere is not installable here (not in the npm registry we reach; its Go
// modules are refused by the module proxy), so this file binds the few resources and
// functions molt needs from the pulumi-vsphere provider by hand: same tokens, same
// property names as the provider's schema (v4), typed for exactly what molt uses. At
// run time the engine uses the real `vsphere` resource plugin at VSPHERE_PROVIDER_VERSION.
// See docs/clouds.md for the route and how to swap in the generated SDK.
import * as pulumi from "@pulumi/pulumi";
import type { ControlPlaneNodeOutputs } from "../node";
import { kubeadmBootstrapCommand } from "../kubeadm/bootstrap";
import type { ConnectionArgs, RemoteCommand } from "../remote/command";
import {
  cloudInitUserData,
  connectionOf,
  keepFirstBootData,
  nodeTags,
  settingForDomain,
  type CloudControlPlaneNodeArgs,
} from "./cloud-common";
import { stringify } from "yaml";

/** The pulumi-vsphere provider plugin version whose schema these bindings follow. */
export const VSPHERE_PROVIDER_VERSION = "4.18.2";

export const VSPHERE_TOKENS = {
  virtualMachine: "vsphere:index/virtualMachine:VirtualMachine",
  antiAffinityRule: "vsphere:index/computeClusterVmAntiAffinityRule:ComputeClusterVmAntiAffinityRule",
  getDatacenter: "vsphere:index/getDatacenter:getDatacenter",
  getComputeCluster: "vsphere:index/getComputeCluster:getComputeCluster",
  getResourcePool: "vsphere:index/getResourcePool:getResourcePool",
  getDatastore: "vsphere:index/getDatastore:getDatastore",
  getNetwork: "vsphere:index/getNetwork:getNetwork",
  getHost: "vsphere:index/getHost:getHost",
  getVirtualMachine: "vsphere:index/getVirtualMachine:getVirtualMachine",
} as const;

// ---- the bound subset of the pulumi-vsphere schema -------------------------------------

export interface VsphereVirtualMachineArgs {
  name: pulumi.Input<string>;
  resourcePoolId: pulumi.Input<string>;
  datastoreId: pulumi.Input<string>;
  folder?: pulumi.Input<string>;
  hostSystemId?: pulumi.Input<string>;
  numCpus: pulumi.Input<number>;
  /** MiB. */
  memory: pulumi.Input<number>;
  guestId: pulumi.Input<string>;
  scsiType?: pulumi.Input<string>;
  firmware?: pulumi.Input<string>;
  enableDiskUuid?: pulumi.Input<boolean>;
  networkInterfaces: pulumi.Input<{ networkId: pulumi.Input<string>; adapterType?: pulumi.Input<string> }[]>;
  disks: pulumi.Input<
    {
      label: pulumi.Input<string>;
      size: pulumi.Input<number>;
      thinProvisioned?: pulumi.Input<boolean>;
      eagerlyScrub?: pulumi.Input<boolean>;
    }[]
  >;
  clone: pulumi.Input<{ templateUuid: pulumi.Input<string>; linkedClone?: pulumi.Input<boolean> }>;
  extraConfig?: pulumi.Input<Record<string, pulumi.Input<string>>>;
  waitForGuestNetTimeout?: pulumi.Input<number>;
  waitForGuestNetRoutable?: pulumi.Input<boolean>;
  annotation?: pulumi.Input<string>;
}

export class VsphereVirtualMachine extends pulumi.CustomResource {
  /** BIOS UUID; also the resource id. */
  declare readonly uuid: pulumi.Output<string>;
  declare readonly moid: pulumi.Output<string>;
  declare readonly defaultIpAddress: pulumi.Output<string>;

  constructor(name: string, args: VsphereVirtualMachineArgs, opts?: pulumi.CustomResourceOptions) {
    super(
      VSPHERE_TOKENS.virtualMachine,
      name,
      { ...args, uuid: undefined, moid: undefined, defaultIpAddress: undefined },
      pulumi.mergeOptions({ version: VSPHERE_PROVIDER_VERSION }, opts),
    );
  }
}

export interface VsphereAntiAffinityRuleArgs {
  name: pulumi.Input<string>;
  computeClusterId: pulumi.Input<string>;
  virtualMachineIds: pulumi.Input<pulumi.Input<string>[]>;
  enabled?: pulumi.Input<boolean>;
  mandatory?: pulumi.Input<boolean>;
}

export class VsphereComputeClusterVmAntiAffinityRule extends pulumi.CustomResource {
  constructor(name: string, args: VsphereAntiAffinityRuleArgs, opts?: pulumi.CustomResourceOptions) {
    super(
      VSPHERE_TOKENS.antiAffinityRule,
      name,
      { ...args },
      pulumi.mergeOptions({ version: VSPHERE_PROVIDER_VERSION }, opts),
    );
  }
}

interface Lookup {
  id: string;
}
interface TemplateLookup extends Lookup {
  guestId: string;
  scsiType: string;
  firmware: string;
  disks: { label: string; size: number; thinProvisioned: boolean; eagerlyScrub: boolean }[];
  networkInterfaceTypes: string[];
}

function invoke<T>(
  token: string,
  args: Record<string, pulumi.Input<string | undefined>>,
  parent: pulumi.Resource,
): pulumi.Output<T> {
  return pulumi.runtime.invokeOutput<T>(token, args, { parent, version: VSPHERE_PROVIDER_VERSION });
}

// ---- molt's node ----------------------------------------------------------------------

export interface VsphereFailureDomain {
  /** Compute cluster (DRS) the VMs run in; the anti-affinity rule lives there. */
  computeCluster: string;
  /** Resource pool path (default "<computeCluster>/Resources"). */
  resourcePool?: string;
  datastore: string;
  /** Pin the VM to one ESXi host (a host-level failure domain); DRS places it otherwise. */
  host?: string;
  /** Port group for this domain (default: settings.network). */
  network?: string;
}

export interface VsphereNodeSettings {
  datacenter: string;
  /** VM folder path, relative to the datacenter's vm folder. */
  folder?: string;
  /** Port group of the control-plane network (DHCP, or addresses reserved by MAC outside molt). */
  network: string;
  numCpus: number;
  memoryMiB: number;
  /** OS disk size (GiB); never smaller than the template's disk. */
  diskGiB: number;
  /** Failure domains by name (a node's failureDomain); one entry for a single domain. */
  failureDomains: Record<string, VsphereFailureDomain>;
  /** Minutes to wait for the guest's routable address (default 10). */
  guestNetTimeoutMinutes?: number;
}

export type VsphereControlPlaneNodeArgs = CloudControlPlaneNodeArgs<VsphereNodeSettings>;

/** cloud-init metadata for the VMware datasource; wipes the guestinfo user data once read. */
export function renderGuestinfoMetadata(nodeName: string): string {
  return stringify(
    { "instance-id": nodeName, "local-hostname": nodeName, "cleanup-guestinfo": ["userdata", "vendordata"] },
    { lineWidth: 0 },
  );
}

function base64(s: string): string {
  return Buffer.from(s).toString("base64");
}

export class VsphereControlPlaneNode extends pulumi.ComponentResource implements ControlPlaneNodeOutputs {
  readonly privateAddress: pulumi.Output<string>;
  readonly sshHost: pulumi.Output<string>;
  readonly sshPort: pulumi.Output<number>;
  readonly hostPublicKey: pulumi.Output<string>;
  readonly providerId: pulumi.Output<string>;
  readonly vm: VsphereVirtualMachine;
  /** Managed object id of the node's compute cluster (for the anti-affinity rule). */
  readonly computeClusterId: pulumi.Output<string>;
  readonly computeClusterName: string;
  /** kubeadm init/join on create, reset on delete. */
  readonly bootstrap: RemoteCommand;
  /** How molt (and a joining node's join material) reaches this node. */
  readonly connection: pulumi.Output<ConnectionArgs>;

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
            "guestinfo.metadata": base64(renderGuestinfoMetadata(node.name)),
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

    this.privateAddress = this.vm.defaultIpAddress;
    this.sshHost = this.privateAddress;
    this.sshPort = pulumi.output(args.ssh.port ?? 22);
    this.hostPublicKey = pulumi.output(args.hostKey.publicKey);
    // The form the vSphere cloud provider gives Node.spec.providerID.
    this.providerId = pulumi.interpolate`vsphere://${this.vm.uuid}`;

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
        machineId: this.vm.uuid,
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

export interface VsphereControlPlaneAntiAffinityArgs {
  clusterName: string;
  nodes: readonly VsphereControlPlaneNode[];
  /** Mandatory rules block power-on when they cannot be met (default false: DRS tries hard, HA may still restart VMs together). */
  mandatory?: boolean;
}

/**
 * One DRS anti-affinity rule per compute cluster over the cluster's control-plane VMs.
 * vSphere wants at least two VMs in a rule, so a domain with one VM has none (a 1 -> 2
 * -> 1 roll creates, then deletes it). Rule names are stable: adding or retiring a node
 * updates the rule's VM list in place.
 */
export class VsphereControlPlaneAntiAffinity extends pulumi.ComponentResource {
  constructor(name: string, args: VsphereControlPlaneAntiAffinityArgs, opts?: pulumi.ComponentResourceOptions) {
    super("molt:vsphere:ControlPlaneAntiAffinity", name, {}, opts);
    // Group by the compute cluster name the settings gave (known at plan time).
    const byCluster = new Map<string, VsphereControlPlaneNode[]>();
    for (const n of args.nodes) {
      const key = n.computeClusterName;
      byCluster.set(key, [...(byCluster.get(key) ?? []), n]);
    }
    for (const [cluster, nodes] of byCluster) {
      if (nodes.length < 2) continue;
      new VsphereComputeClusterVmAntiAffinityRule(
        `${name}-${cluster}`,
        {
          name: `${args.clusterName}-control-plane-anti-affinity`,
          computeClusterId: nodes[0].computeClusterId,
          virtualMachineIds: nodes.map((n) => n.vm.uuid),
          enabled: true,
          mandatory: args.mandatory ?? false,
        },
        { parent: this },
      );
    }
    this.registerOutputs({});
  }
}
