// The Azure API load balancer's backend pool as molt's retirement asks it (core/edges.ts
// LoadBalancerEdge): a node leaves the pool (its NIC's IP configuration, as pool-membership-impl
// edits it) before its API server stops, and each node's health comes from the load-balancing
// rule's health API (POST .../loadBalancingRules/<rule>/health: Up or Down per backend IP
// configuration). Azure's load balancer has no deregistration delay: a node is drained once
// Azure has applied its removal (the NIC provisioned without the pool).
import type { LoadBalancerEdge } from "../../../orchestrator/core/edges";
import type { NodeEndpoint } from "../../../orchestrator/core/nodes";
import type { LoadBalancerObservation, TargetObservation } from "../../../orchestrator/core/observations";
import {
  configurationsInPool,
  leavePool,
  NETWORK_API_VERSION,
  primaryNicOf,
  type Arm,
  type ArmResource,
  type WaitOptions,
} from "./pool-membership-impl";

/** ARM with the POST the rule health API needs (the real client follows its 202 to the answer). */
export interface ArmWithPost extends Arm {
  post(id: string, apiVersion: string): Promise<unknown>;
}

/** The health API's answer (LoadBalancerHealthPerRule). */
interface RuleHealth {
  loadBalancerBackendAddresses?: { networkInterfaceIPConfigurationId?: string; state?: string; reason?: string }[];
}

interface LoadBalancerResource extends ArmResource {
  properties?: ArmResource["properties"] & {
    loadBalancingRules?: {
      id?: string;
      name?: string;
      properties?: {
        frontendPort?: number;
        backendAddressPool?: { id?: string };
        backendAddressPools?: { id?: string }[];
        probe?: { id?: string };
      };
    }[];
    probes?: {
      id?: string;
      properties?: { intervalInSeconds?: number; numberOfProbes?: number; probeThreshold?: number };
    }[];
  };
}

const same = (a: string | undefined, b: string | undefined) => (a ?? "").toLowerCase() === (b ?? "").toLowerCase();

/** The VM of an Azure node, from its provider id (azure:///subscriptions/...). */
export function vmOf(node: NodeEndpoint): string | undefined {
  return /^azure:\/\/(\/subscriptions\/.+\/virtualMachines\/[^/]+)$/i.exec(node.providerId)?.[1];
}

/** The NIC with the pool on its primary IP configuration (or its only one), every other property as it was. */
export function withPool(nic: ArmResource, poolId: string): ArmResource {
  const configs = nic.properties?.ipConfigurations ?? [];
  const primary = configs.findIndex((c) => (c.properties as { primary?: boolean } | undefined)?.primary);
  const at = primary >= 0 ? primary : 0;
  return {
    ...nic,
    properties: {
      ...nic.properties,
      ipConfigurations: configs.map((c, i) =>
        i !== at
          ? c
          : {
              ...c,
              properties: {
                ...c.properties,
                loadBalancerBackendAddressPools: [
                  ...(c.properties?.loadBalancerBackendAddressPools ?? []),
                  { id: poolId },
                ],
              },
            },
      ),
    },
  };
}

export class AzureApiTargets implements LoadBalancerEdge {
  constructor(
    private readonly poolId: string,
    private readonly arm: ArmWithPost,
    private readonly wait?: WaitOptions,
  ) {}

  private get lbId(): string {
    return this.poolId.replace(/\/backendAddressPools\/[^/]+$/i, "");
  }

  async observe(nodes: readonly NodeEndpoint[]): Promise<LoadBalancerObservation> {
    const lb = (await this.arm.get(this.lbId, NETWORK_API_VERSION)) as LoadBalancerResource | undefined;
    if (!lb) throw new Error(`load balancer ${this.lbId} does not exist`);
    const rules = (lb.properties?.loadBalancingRules ?? []).filter((r) =>
      [r.properties?.backendAddressPool, ...(r.properties?.backendAddressPools ?? [])].some((p) =>
        same(p?.id, this.poolId),
      ),
    );
    const rule = rules.find((r) => r.properties?.frontendPort === 6443) ?? rules[0];
    if (!rule?.id) throw new Error(`no load-balancing rule of ${this.lbId} sends to backend pool ${this.poolId}`);
    const probe = (lb.properties?.probes ?? []).find((p) => same(p.id, rule.properties?.probe?.id));
    const interval = probe?.properties?.intervalInSeconds ?? 15;
    const threshold = probe?.properties?.probeThreshold ?? probe?.properties?.numberOfProbes ?? 2;
    const health = (await this.arm.post(`${rule.id}/health`, NETWORK_API_VERSION)) as RuleHealth;
    const targets: Record<string, TargetObservation> = {};
    await Promise.all(
      nodes.map(async (n) => {
        try {
          targets[n.name] = await this.targetOf(n, health);
        } catch (e) {
          targets[n.name] = { error: (e as Error).message.split("\n")[0] };
        }
      }),
    );
    return {
      name: `backend pool ${this.poolId.split("/").pop()} of ${lb.name ?? this.lbId}`,
      targets,
      drainSeconds: interval * threshold,
    };
  }

  private async targetOf(n: NodeEndpoint, health: RuleHealth): Promise<TargetObservation> {
    const vm = vmOf(n);
    if (!vm) return { error: `no Azure VM id in its provider id ${JSON.stringify(n.providerId)}` };
    const nicId = await primaryNicOf(this.arm, vm);
    const nic = await this.arm.get(nicId, NETWORK_API_VERSION);
    if (!nic) return { state: "unused", detail: "its network interface is gone" };
    const inPool = configurationsInPool(nic, this.poolId);
    const applying = nic.properties?.provisioningState !== "Succeeded";
    if (inPool.length === 0)
      return applying ? { state: "draining", detail: "Azure is applying its removal" } : { state: "unused" };
    const configIds = inPool.map((c) => `${nicId}/ipConfigurations/${c}`);
    const h = (health.loadBalancerBackendAddresses ?? []).find((a) =>
      configIds.some((id) => same(id, a.networkInterfaceIPConfigurationId)),
    );
    if (!h || applying) return { state: "initial", detail: applying ? "Azure is applying it" : "not yet probed" };
    const detail = h.reason || undefined;
    const state = h.state === "Up" ? "healthy" : "unhealthy";
    return detail ? { state, detail } : { state };
  }

  async deregister(node: NodeEndpoint): Promise<void> {
    const vm = this.vm(node);
    const nicId = await primaryNicOf(this.arm, vm);
    await leavePool(this.arm, { vmId: vm, backendPoolId: this.poolId, nicId, ipConfigurations: [] }, this.wait);
  }

  async register(node: NodeEndpoint): Promise<void> {
    const nicId = await primaryNicOf(this.arm, this.vm(node));
    const nic = await this.arm.get(nicId, NETWORK_API_VERSION);
    if (!nic) throw new Error(`network interface ${nicId} of ${node.name} does not exist`);
    if (configurationsInPool(nic, this.poolId).length > 0) return;
    await this.arm.put(nicId, NETWORK_API_VERSION, withPool(nic, this.poolId), nic.etag);
  }

  private vm(node: NodeEndpoint): string {
    const vm = vmOf(node);
    if (!vm) throw new Error(`${node.name}: no Azure VM id in its provider id ${JSON.stringify(node.providerId)}`);
    return vm;
  }
}
