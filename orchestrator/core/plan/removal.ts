// A node removed because it failed (a rollback) or is dead (--replace-dead) leaves the API
// load balancer before its member or its machine goes, as a retiring node does, but without
// the wait for a drain: a dead target has no connections left to finish, and a new node
// that failed either never was in rotation or is failing the requests it holds. Waiting
// could only end in registering a failing node again (what a retirement's timed-out drain
// does). The removal goes on once the load balancer sends the node nothing new (draining,
// unused), and where it cannot be asked: the removal's `up` takes the node's attachment too.
import type { Operation, World } from "../model";

export function targetRemoval(s: World, node: string, why: string): Operation | undefined {
  const t = s.lb?.targets[node];
  if (!s.lb || !t || "error" in t || t.state === "draining" || t.state === "unused") return undefined;
  return {
    kind: "deregister-target",
    node,
    drain: false,
    reason: `${why}: take ${node} out of ${s.lb.name} (${t.state}) before it is removed, without waiting for a drain`,
  };
}
