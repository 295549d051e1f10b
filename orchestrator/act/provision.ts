// Changes of the node list, each one targeted `up` of the engine: the first node, a surge,
// a prune (alone or with the next surge), a rollback, and the destruction of what a failed
// surge left.
import type { Act, ActContext } from "./context";
import { firstLines } from "./context";
import { EngineCancelledError } from "../stack/cancelled";
import { AnotherUpdateInProgressError, StateChangedByAnotherRunError } from "../stack/state-changed";
import { ownerOf, urnName } from "../stack/targets";
import { UpFailedError, type UpRecord } from "../stack/up-events";
import { teardownEnv } from "../teardown";

/** Appends the planner's new entry (with its failure domain) and creates its machine, which joins. */
export const surge: Act<"surge" | "create-first"> = async (op, ctx) => {
  const prev = ctx.world.nodes;
  const node = op.entry.name;
  try {
    await ctx.timed("provision", op.kind, node, () =>
      ctx.edges.stack.apply({ op, prev, next: [...prev, op.entry], node }),
    );
    return { kind: "done" };
  } catch (e) {
    // A cancelled run stops at this boundary (orchestrator/rollout.ts), not as a failed join; so
    // does a run whose `up` the state guard refused (another run changed the stack: nothing to roll back).
    if (
      e instanceof EngineCancelledError ||
      e instanceof StateChangedByAnotherRunError ||
      e instanceof AnotherUpdateInProgressError
    )
      throw e;
    const why = firstLines((e as Error).message);
    ctx.report({ type: "phase", phase: "provision", operation: op.kind, node, ms: 0, ok: false, detail: why });
    if (op.kind === "create-first")
      return { kind: "stop", result: "failed", reason: `creating the first node failed: ${why}` };
    // The next pass finds the half-made node and rolls it back (or the run pauses).
    return { kind: "surge-failed", node, why: firstLines((e as Error).message, 3) };
  }
};

/**
 * Destroys a node without a member, without its reset (orchestrator/teardown.ts); with
 * Kubernetes its Node object is deleted after the machine. A destroy that fails throws
 * before that: the Node stays (cordoned) while the machine may still run, so its kubelet
 * never registers a fresh, schedulable Node; the next pass destroys what is left.
 */
export const prune: Act<"prune"> = async (op, ctx) => {
  const prev = ctx.world.nodes;
  await ctx.timed("provision", op.kind, op.node, () =>
    ctx.edges.stack.apply({
      op,
      prev,
      next: prev.filter((n) => n.name !== op.node),
      node: op.node,
      // The machine is destroyed without its teardown (infra/remote/teardown.ts).
      teardownEnv: teardownEnv(op, ctx.world.endpoints),
    }),
  );
  await deleteNodeAfterPrune(op.node, op.deleteNodeVia, ctx);
  return { kind: "done" };
};

/**
 * Did the `up` fail only in steps of the retired node? The engine deletes it after every
 * create, so the new node was made whole; any other failure (one of the new node's steps, a
 * cluster-wide resource, none shown) counts as a failed surge: the new node is rolled back.
 */
function onlyRetiredNodeFailed(record: UpRecord, retired: string, added: string): boolean {
  const owners = record.failed.map((u) => ownerOf(urnName(u), [retired, added]));
  return owners.length > 0 && owners.every((o) => o === retired);
}

/** With Kubernetes, a destroyed node's Node object goes after its machine, through another API server. */
async function deleteNodeAfterPrune(node: string, via: string | undefined, ctx: ActContext): Promise<void> {
  if (!via) return;
  // Not fatal: the next pass finds the Node without a machine (its Lease goes stale) and deletes it.
  const kube = await ctx.edges.nodes.kube();
  await ctx
    .timed("kube", "delete-node", node, () => kube.deleteNode(via, node, { machineGone: true }))
    .then((left) => reportPodsLeft(node, left, ctx))
    .catch((e: Error) =>
      ctx.report({
        type: "phase",
        phase: "kube",
        operation: "delete-node",
        node,
        ms: 0,
        ok: false,
        detail:
          `the Node could not be deleted now (${e.message.split("\n")[0]}); ` + "it is deleted once its Lease is stale",
      }),
    );
}

/** Pods of a deleted Node molt could not delete: the pod garbage collector takes them later. */
export function reportPodsLeft(node: string, left: string[], ctx: Pick<ActContext, "report">): void {
  if (left.length === 0) return;
  ctx.report({
    type: "warning",
    node,
    message:
      `the Node of ${node} was deleted, but not all of its pods (${left.join("; ")}): the pod garbage ` +
      "collector deletes them within about 40 s, until then a DaemonSet's rollout may count them unavailable",
  });
}

/**
 * molt:rollout.pruneWithNextSurge: one `up` destroys the retired node and creates the next
 * (plan/overlap.ts); then the retired node's Node object goes, as after a prune. When the
 * `up` fails, its events say which half failed: only steps of the retired node (its deletes
 * come after every create) and the new node joined, and what is left of the retired node is
 * destroyed by the next pass; anything else fails as a surge does (rolled back, or paused).
 */
export const pruneAndSurge: Act<"prune-and-surge"> = async (op, ctx) => {
  const prev = ctx.world.nodes;
  const node = op.entry.name;
  const next = [...prev.filter((n) => n.name !== op.node), op.entry];
  const label = `${op.node}->${node}`;
  try {
    await ctx.timed("provision", op.kind, label, () =>
      ctx.edges.stack.apply({ op, prev, next, node: op.node, teardownEnv: teardownEnv(op, ctx.world.endpoints) }),
    );
  } catch (e) {
    // A cancel, anything refused before the engine ran (the stored list changed), and an engine
    // that failed before any step (a locked stack, a refused backend) stop the run.
    if (!(e instanceof UpFailedError) || (e.record.failed.length === 0 && e.record.finished.size === 0)) throw e;
    const why = firstLines(e.message);
    ctx.report({ type: "phase", phase: "provision", operation: op.kind, node: label, ms: 0, ok: false, detail: why });
    if (!onlyRetiredNodeFailed(e.record, op.node, node))
      return { kind: "surge-failed", node, why: firstLines(e.message, 3) };
    ctx.report({
      type: "warning",
      node: op.node,
      message:
        `${node} joined, but the same update failed to destroy ${op.node} (${why}); the next pass destroys what ` +
        `is left of it`,
    });
    return { kind: "done" };
  }
  await deleteNodeAfterPrune(op.node, op.deleteNodeVia, ctx);
  return { kind: "done" };
};

/** The new node failed: its member goes (through another node), then its machine. Old nodes are untouched. */
export const rollback: Act<"rollback"> = async (op, ctx) => {
  const { memberId, via } = op;
  if (memberId && via) {
    const etcd = await ctx.edges.nodes.etcd();
    await ctx.timed("etcd", op.kind, op.node, () => etcd.memberRemove(via, memberId));
  }
  const prev = ctx.world.nodes;
  await ctx.timed("provision", op.kind, op.node, () =>
    ctx.edges.stack.apply({
      op,
      prev,
      next: prev.filter((n) => n.name !== op.node),
      node: op.node,
      teardownEnv: teardownEnv(op, ctx.world.endpoints),
    }),
  );
  return { kind: "done" };
};

export const pruneOrphans: Act<"prune-orphans"> = async (op, ctx) => {
  await ctx.timed("provision", "prune", op.nodes.join(","), () => ctx.edges.stack.destroyOrphans(op.nodes));
  return { kind: "done" };
};
