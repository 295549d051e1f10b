// The DRS anti-affinity rule that keeps a cluster's control-plane VMs on different hosts.
import * as pulumi from "@pulumi/pulumi";
import { VsphereComputeClusterVmAntiAffinityRule } from "./bindings";
import type { VsphereControlPlaneNode } from "./node";

export interface VsphereControlPlaneAntiAffinityArgs {
  clusterName: string;
  nodes: readonly VsphereControlPlaneNode[];
  /**
   * Mandatory rules block power-on when they cannot be met (default false: DRS tries hard,
   * HA may still restart VMs together).
   */
  mandatory?: boolean;
}

/**
 * One DRS anti-affinity rule per compute cluster over the cluster's control-plane VMs.
 * vSphere wants at least two VMs in a rule, so a domain with one VM has none (a 1 -> 2
 * -> 1 roll creates, then deletes it). Rule names are stable: adding or retiring a node
 * updates the rule's VM list in place. Rules need DRS: turn them off with
 * molt:vsphereAntiAffinity.enabled false on clusters without it.
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
