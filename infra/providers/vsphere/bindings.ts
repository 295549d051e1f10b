// @pulumi/vsphere is not installable here (not in the npm registry we reach; its Go
// modules are refused by the module proxy), so this file binds the few resources and
// functions molt needs from the pulumi-vsphere provider by hand: same tokens, same
// property names as the provider's schema (v4), typed for exactly what molt uses. At
// run time the engine uses the real `vsphere` resource plugin at VSPHERE_PROVIDER_VERSION
// (checked before any up: orchestrator/stack/plugins.ts). See docs/clouds.md for the route
// and how to swap in the generated SDK.
import * as pulumi from "@pulumi/pulumi";

/** The pulumi-vsphere provider plugin version whose schema these bindings follow. */
export const VSPHERE_PROVIDER_VERSION = "4.18.2";

export const VSPHERE_TOKENS = {
  virtualMachine: "vsphere:index/virtualMachine:VirtualMachine",
  drsVmOverride: "vsphere:index/drsVmOverride:DrsVmOverride",
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

export interface VsphereDrsVmOverrideArgs {
  computeClusterId: pulumi.Input<string>;
  virtualMachineId: pulumi.Input<string>;
  drsEnabled?: pulumi.Input<boolean>;
  drsAutomationLevel?: pulumi.Input<string>;
}

export class VsphereDrsVmOverride extends pulumi.CustomResource {
  constructor(name: string, args: VsphereDrsVmOverrideArgs, opts?: pulumi.CustomResourceOptions) {
    super(
      VSPHERE_TOKENS.drsVmOverride,
      name,
      { ...args },
      pulumi.mergeOptions({ version: VSPHERE_PROVIDER_VERSION }, opts),
    );
  }
}

export interface Lookup {
  id: string;
}
export interface TemplateLookup extends Lookup {
  guestId: string;
  scsiType: string;
  firmware: string;
  disks: { label: string; size: number; thinProvisioned: boolean; eagerlyScrub: boolean }[];
  networkInterfaceTypes: string[];
}

export function invoke<T>(
  token: string,
  args: Record<string, pulumi.Input<string | undefined>>,
  parent: pulumi.Resource,
): pulumi.Output<T> {
  return pulumi.runtime.invokeOutput<T>(token, args, { parent, version: VSPHERE_PROVIDER_VERSION });
}
