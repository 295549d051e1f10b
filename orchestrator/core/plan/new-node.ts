// A node this run (or a surge still in progress) added and has not yet seen healthy: it
// gets the join deadline, then is rolled back (or the run pauses). Old nodes never are.
import type { Operation } from "../model";
import { isOutdated, isUnreachable } from "./rules";
import { targetRemoval } from "./removal";
import type { Scope } from "./scope";

/**
 * Is `node` a new node not yet seen healthy: the one this run added, or (after a run that
 * ended before its new node became healthy) the newest, up-to-date node of a surge still
 * in progress (more nodes than replicas)? A new node still in its soak counts as well.
 */
export function isJoining(c: Scope, node: string): boolean {
  const { s } = c;
  if (node !== c.newest.name || s.nodes.length <= 1) return false;
  if (node === s.joining) return true;
  // A new node in its soak (molt:rollout.soakSeconds) that turns unhealthy is rolled back too.
  if (node === s.controls?.watching && (s.intent.timeouts.soakSeconds ?? 0) > 0 && !s.expired.includes(`soak:${node}`))
    return true;
  return s.nodes.length > s.intent.replicas && !isOutdated(c.newest, s.intent, s.certificates) && c.outdated.length > 0;
}

export function failNewNode(c: Scope, node: string, memberId: string | undefined, reason: string): Operation {
  if (c.s.intent.rollout.onFailure === "pause")
    return { kind: "pause", node, reason: `${reason}; left in place for inspection (--on-failure pause)` };
  const leave = targetRemoval(c.s, node, reason);
  if (leave) return leave;
  // The member is removed through another node that answers.
  const via = c.s.nodes.find((n) => n.name !== node && c.s.etcd?.status[n.name]?.ok)?.name;
  return {
    kind: "rollback",
    node,
    ...(memberId ? { memberId } : {}),
    ...(memberId && via ? { via } : {}),
    reason,
    ...(isUnreachable(c.s, node) ? { unreachable: true } : {}),
  };
}
