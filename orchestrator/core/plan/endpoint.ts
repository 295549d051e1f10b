// The planner's rules for the API load balancer (World.lb), pure like decide.ts. A cloud LB
// learns of a dead target only from its health check (tens of seconds), so molt tells it
// first: a node to retire is deregistered and drained before its API server stops or its etcd
// member goes, and a new node counts in only once the load balancer calls it healthy.
import type { Operation, World } from "../model";
import type { TargetObservation } from "../observations";
import { failNewNode, isJoining } from "./new-node";
import type { Scope } from "./scope";

/** Is `node` healthy in the API load balancer (true where molt observes none)? */
export function isTargetHealthy(s: World, node: string): boolean {
  if (!s.lb) return true;
  const t = s.lb.targets[node];
  return !!t && "state" in t && t.state === "healthy";
}

function describe(t: TargetObservation | undefined): string {
  if (!t) return "not observed";
  if ("error" in t) return `not observed: ${t.error}`;
  return t.detail ? `${t.state} (${t.detail})` : t.state;
}

/**
 * Every node that stays is healthy in the load balancer. A new node waits for it within the
 * join deadline (then it is rolled back, or the run pauses); a node left deregistered by a
 * run that stopped mid-retirement is registered again; any other node that is not healthy
 * stops the rollout before anything changes.
 */
export function endpointHealth(c: Scope): Operation | undefined {
  const { s } = c;
  const lb = s.lb;
  if (!lb) return undefined;
  for (const n of c.byAge) {
    if (n.name === c.victim?.name || isTargetHealthy(s, n.name)) continue;
    const t = lb.targets[n.name];
    const seen = describe(t);
    const joining = isJoining(c, n.name);
    if (!joining && t && "state" in t && (t.state === "unused" || t.state === "draining"))
      return {
        kind: "register-target",
        node: n.name,
        reason:
          `${n.name} stays but is not in ${lb.name} (${seen}; a retirement that did not finish): ` +
          "register it again",
      };
    const key = `lb:${n.name}` as const;
    if (joining) {
      if (s.expired.includes(key))
        return failNewNode(
          c,
          n.name,
          c.memberOf(n)?.id,
          `new node ${n.name} did not become healthy in ${lb.name} within the join deadline (${seen})`,
        );
      return { kind: "wait", key, node: n.name, reason: `waiting for ${lb.name} to call ${n.name} healthy (${seen})` };
    }
    if (s.expired.includes(key)) {
      // Without Kubernetes the load balancer serves etcd's client port (the lab's etcd-only clusters).
      const etcd = s.intent.kubernetesVersion === undefined;
      const check = lb.healthCheck ?? (etcd ? "etcd's client port 2379" : "the API server's port 6443");
      return {
        kind: "refuse",
        condition: "APIEndpointHealthy",
        reason:
          `${n.name} is not healthy in ${lb.name} (${seen}) although its ${etcd ? "etcd member" : "control plane"} ` +
          `is; no node was changed. Check the load balancer's health check (${check}) and the security rules ` +
          "between them",
      };
    }
    return { kind: "wait", key, node: n.name, reason: `${n.name} is not healthy in ${lb.name} yet (${seen})` };
  }
  return undefined;
}

/**
 * A new node an earlier run surged that is out of the load balancer (draining, unused) was
 * taken out by that run's rollback (`deregister-target` with `drain: false`), which a kill
 * interrupted: the load balancer's state is its only record (the run's memory died with it).
 * Nothing puts a new node back, so it could only wait out a fresh join deadline, unhealthy
 * (its etcd, control plane or target), and fail again: the rollback goes on at once, as in
 * the run that started it. Not for this run's own new node: its `up` registered it just now
 * (a cloud API may not say so at once).
 */
export function unfinishedRollback(c: Scope): Operation | undefined {
  const { s } = c;
  if (!s.lb || s.nodes.length < 2) return undefined;
  const n = c.newest;
  const t = s.lb.targets[n.name];
  if (n.name === s.joining || !t || !("state" in t) || (t.state !== "draining" && t.state !== "unused"))
    return undefined;
  if (!isJoining(c, n.name)) return undefined;
  return failNewNode(
    c,
    n.name,
    c.memberOf(n)?.id,
    `new node ${n.name} is out of ${s.lb.name} (${describe(t)}): the rollback an earlier run started ` +
      "(deregistered without a drain) did not finish",
  );
}

/**
 * The node to retire leaves the load balancer before its API server stops (or, etcd alone,
 * before its member goes): deregistered, and drained (the deregistration delay honoured),
 * which the act waits for. Undefined once the load balancer reports it unused.
 */
export function targetRelease(s: World, victim: string): Operation | undefined {
  const lb = s.lb;
  if (!lb) return undefined;
  const t = lb.targets[victim];
  if (t && "state" in t && t.state === "unused") return undefined;
  if (!t || "error" in t) {
    const key = `lb:${victim}` as const;
    if (s.expired.includes(key))
      return {
        kind: "refuse",
        condition: "APIEndpointHealthy",
        reason: `${lb.name} could not be asked about ${victim} (${describe(t)}); nothing was removed`,
      };
    return { kind: "wait", key, node: victim, reason: `waiting to observe ${victim} in ${lb.name} (${describe(t)})` };
  }
  return {
    kind: "deregister-target",
    node: victim,
    reason:
      `retire ${victim}: take it out of ${lb.name} (${t.state}) and wait until it has drained (up to ` +
      `${lb.drainSeconds}s) while its API server still serves`,
  };
}
