// One home per operation: the planner decides (orchestrator/plan), an act carries it out.
// A new operation is a new `kind` in model.ts, its rule in plan/decide.ts, and its act here.
import type { ActOutcome } from "../core/memory";
import type { Operation } from "../core/model";
import type { ActContext } from "./context";
import { membership } from "./etcd";
import { deleteNode, drain, restoreControlPlane, stopApiServer, updateAddons, updateClusterConfig } from "./kube";
import { prune, pruneAndSurge, pruneOrphans, rollback, surge } from "./provision";
import { deregisterTarget, registerTarget, releaseVip } from "./endpoint";
import { retireAdopted } from "./adopted";
import { hook } from "./hooks";
import { claimOwnership } from "./ownership";

export type Change = Exclude<Operation, { kind: "done" | "wait" | "refuse" | "pause" }>;

const ACTS: { [K in Change["kind"]]: (op: Extract<Operation, { kind: K }>, ctx: ActContext) => Promise<ActOutcome> } = {
  "create-first": surge,
  surge,
  prune,
  "prune-and-surge": pruneAndSurge,
  "retire-adopted": retireAdopted,
  "prune-orphans": pruneOrphans,
  rollback,
  "promote-learner": membership,
  "move-leader": membership,
  "remove-member": membership,
  "remove-stray-member": membership,
  "update-cluster-config": updateClusterConfig,
  drain,
  "stop-apiserver": stopApiServer,
  "restore-control-plane": restoreControlPlane,
  "delete-node": deleteNode,
  "update-addons": updateAddons,
  "release-vip": releaseVip,
  "deregister-target": deregisterTarget,
  "register-target": registerTarget,
  hook,
  "claim-ownership": claimOwnership,
};

/** Does the operation change the cluster or the stack (rather than wait or end the run)? */
export function isChange(op: Operation): op is Change {
  return op.kind in ACTS;
}

// Typed: a renamed kind is a compile error here, not a silent miss.
const MEMBERSHIP = new Set<Operation["kind"]>([
  "promote-learner",
  "move-leader",
  "remove-member",
  "remove-stray-member",
  "rollback",
]);

/** Operations that change etcd's membership: an etcd snapshot is saved before the first of a run. */
export function changesMembership(op: Operation): boolean {
  return MEMBERSHIP.has(op.kind);
}

export function act(op: Change, ctx: ActContext): Promise<ActOutcome> {
  const fn = ACTS[op.kind] as (op: Change, ctx: ActContext) => Promise<ActOutcome>;
  return fn(op, ctx);
}
