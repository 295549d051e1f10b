// The AWS API load balancer as molt's retirement asks it (core/edges.ts LoadBalancerEdge): a
// node's instance deregistered from the NLB target group (port 6443) or the classic ELB before
// its API server stops, and each instance's health as AWS reports it. Pulumi's AWS provider has
// no invoke for target health, so molt calls Elastic Load Balancing itself, through ElbApi
// (a fake in the unit tests).
import type { LoadBalancerEdge } from "../../../orchestrator/core/edges";
import type { NodeEndpoint } from "../../../orchestrator/core/nodes";
import type { LoadBalancerObservation, TargetObservation } from "../../../orchestrator/core/observations";

/** What molt asks of Elastic Load Balancing (v2 for target groups, the classic API for a classic ELB). */
export interface ElbApi {
  /** DescribeTargetHealth for these instances on port 6443. */
  describeTargetHealth(
    targetGroupArn: string,
    instanceIds: string[],
  ): Promise<{ id: string; state: string; reason?: string; description?: string }[]>;
  deregisterTargets(targetGroupArn: string, instanceIds: string[]): Promise<void>;
  registerTargets(targetGroupArn: string, instanceIds: string[]): Promise<void>;
  /** deregistration_delay.timeout_seconds and the health check (DescribeTargetGroups, ...Attributes). */
  targetGroupTiming(targetGroupArn: string): Promise<LbTiming>;
  /**
   * DescribeInstanceHealth; an instance the ELB never held is left out (AWS answers InvalidInstance),
   * one it no longer holds is OutOfService "Instance is not currently registered with the LoadBalancer."
   */
  describeInstanceHealth(
    elbName: string,
    instanceIds: string[],
  ): Promise<{ id: string; state: string; reasonCode?: string; description?: string }[]>;
  deregisterInstances(elbName: string, instanceIds: string[]): Promise<void>;
  registerInstances(elbName: string, instanceIds: string[]): Promise<void>;
  /** Connection draining's timeout (0 when off) and the health check (DescribeLoadBalancers, ...Attributes). */
  classicTiming(elbName: string): Promise<LbTiming>;
}

export interface LbTiming {
  /** Target group: deregistration delay; classic ELB: connection draining timeout (0 when off). */
  drainSeconds: number;
  intervalSeconds: number;
  unhealthyThreshold: number;
}

export type AwsTargetsOf = { targetGroupArn: string } | { classicElb: string };

const PROVIDER_ID = /^aws:\/\/\/[^/]*\/(i-[0-9a-f]{8}(?:[0-9a-f]{9})?)$/;

/** The node's EC2 instance, from its provider id (aws:///ZONE/ID). */
export function instanceOf(node: NodeEndpoint): string | undefined {
  return PROVIDER_ID.exec(node.providerId)?.[1];
}

/** A target group's state in molt's words (AWS's, with `unavailable` counted unhealthy). */
export function targetGroupState(t: { state: string; reason?: string; description?: string }): TargetObservation {
  const detail = [t.reason, t.description].filter(Boolean).join(": ") || undefined;
  const state =
    t.state === "unavailable"
      ? "unhealthy"
      : (["initial", "healthy", "unhealthy", "draining", "unused"] as const).find((s) => s === t.state);
  if (!state) return { error: `target group reports state ${t.state}${detail ? ` (${detail})` : ""}` };
  return detail ? { state, detail } : { state };
}

/**
 * A classic ELB's instance state in molt's words: InService while connection draining runs is
 * draining (AWS says so in the description); OutOfService while the registration is still in
 * progress is initial; an instance it does not hold is unused (one it held once is still
 * described: "not currently registered", whatever its state).
 */
export function classicState(
  t: { state: string; reasonCode?: string; description?: string } | undefined,
): TargetObservation {
  if (!t) return { state: "unused", detail: "not registered" };
  const detail = t.description || undefined;
  if (/not currently registered/i.test(t.description ?? "")) return { state: "unused", ...(detail ? { detail } : {}) };
  const draining = /deregistration currently in progress/i.test(t.description ?? "");
  const registering = /registration is still in progress/i.test(t.description ?? "");
  const state =
    t.state === "InService"
      ? draining
        ? "draining"
        : "healthy"
      : t.state === "OutOfService"
        ? registering
          ? "initial"
          : "unhealthy"
        : "initial";
  return detail ? { state, detail } : { state };
}

export class AwsApiTargets implements LoadBalancerEdge {
  constructor(
    private readonly lb: AwsTargetsOf,
    private readonly api: ElbApi,
  ) {}

  private get name(): string {
    return "classicElb" in this.lb ? `classic ELB ${this.lb.classicElb}` : `target group ${this.lb.targetGroupArn}`;
  }

  async observe(nodes: readonly NodeEndpoint[]): Promise<LoadBalancerObservation> {
    const targets: Record<string, TargetObservation> = {};
    const ids = new Map<string, string>();
    for (const n of nodes) {
      const id = instanceOf(n);
      if (id) ids.set(n.name, id);
      else targets[n.name] = { error: `no EC2 instance id in its provider id ${JSON.stringify(n.providerId)}` };
    }
    const wanted = [...new Set(ids.values())];
    const lb = this.lb;
    const [timing, seen] =
      "classicElb" in lb
        ? await Promise.all([
            this.api.classicTiming(lb.classicElb),
            wanted.length ? this.api.describeInstanceHealth(lb.classicElb, wanted) : Promise.resolve([]),
          ])
        : await Promise.all([
            this.api.targetGroupTiming(lb.targetGroupArn),
            wanted.length ? this.api.describeTargetHealth(lb.targetGroupArn, wanted) : Promise.resolve([]),
          ]);
    for (const [node, id] of ids) {
      const t = seen.find((s) => s.id === id);
      targets[node] =
        "classicElb" in lb ? classicState(t) : t ? targetGroupState(t) : { state: "unused", detail: "not registered" };
    }
    return {
      name: this.name,
      targets,
      drainSeconds: timing.drainSeconds + timing.intervalSeconds * timing.unhealthyThreshold,
    };
  }

  async deregister(node: NodeEndpoint): Promise<void> {
    const id = this.instance(node);
    if ("classicElb" in this.lb) await this.api.deregisterInstances(this.lb.classicElb, [id]);
    else await this.api.deregisterTargets(this.lb.targetGroupArn, [id]);
  }

  async register(node: NodeEndpoint): Promise<void> {
    const id = this.instance(node);
    if ("classicElb" in this.lb) await this.api.registerInstances(this.lb.classicElb, [id]);
    else await this.api.registerTargets(this.lb.targetGroupArn, [id]);
  }

  private instance(node: NodeEndpoint): string {
    const id = instanceOf(node);
    if (!id) throw new Error(`${node.name}: no EC2 instance id in its provider id ${JSON.stringify(node.providerId)}`);
    return id;
  }
}
