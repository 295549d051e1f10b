// The planner's ownership step (core/ownership.ts): before any change of the cluster, the
// cluster must be this stack's. Another stack's marker refuses: its new, healthy voters are
// strays to this stack, and removing them is exactly the harm. No marker: claim it first.
import type { Operation } from "../model";
import { claimDecision, describeOwner } from "../ownership";
import type { Scope } from "./scope";

export function ownership(c: Scope): Operation | undefined {
  const o = c.s.ownership;
  if (!o) return undefined;
  const takeOver = c.s.intent.takeOver;
  const d = claimDecision({ command: "rollout", self: o.self, ...(takeOver ? { takeOver } : {}) }, o.marker);
  switch (d.kind) {
    case "owned":
      return undefined;
    case "refuse":
      return { kind: "refuse", condition: d.condition, reason: d.problem };
    case "unobserved":
      if (c.s.expired.includes("owner"))
        return {
          kind: "refuse",
          condition: "ClusterOwnerUnknown",
          reason: `the cluster's ownership marker cannot be read (${d.error}); nothing was changed`,
        };
      return { kind: "wait", key: "owner", reason: `reading the cluster's ownership marker failed: ${d.error}` };
    case "claim":
      return {
        kind: "claim-ownership",
        owner: o.self,
        ...(d.ifRevision ? { ifRevision: d.ifRevision } : {}),
        reason: d.from
          ? `--take-over ${d.from.stack}: the cluster passes from ${describeOwner(d.from)} to ${describeOwner(o.self)}`
          : `the cluster has no ownership marker: ${describeOwner(o.self)} claims it before any change`,
      };
  }
}
