// Changes of the node list, each one targeted `up` of the engine: the first node, a surge,
// a prune, a rollback, and the destruction of what a failed surge left.
import type { Act } from "./context";
import { firstLines } from "./context";
import { EngineCancelledError } from "../stack/cancelled";
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
    // A cancelled run stops at this boundary (orchestrator/rollout.ts), not as a failed join.
    if (e instanceof EngineCancelledError) throw e;
    const why = firstLines((e as Error).message);
    ctx.report({ type: "phase", phase: "provision", operation: op.kind, node, ms: 0, ok: false, detail: why });
    if (op.kind === "create-first")
      return { kind: "stop", result: "failed", reason: `creating the first node failed: ${why}` };
    // The next pass finds the half-made node and rolls it back (or the run pauses).
    return { kind: "surge-failed", node, why: firstLines((e as Error).message, 3) };
  }
};

/** Destroys a node without a member; with Kubernetes its Node object is deleted after the machine. */
export const prune: Act<"prune"> = async (op, ctx) => {
  const prev = ctx.world.nodes;
  await ctx.timed("provision", op.kind, op.node, () =>
    ctx.edges.stack.apply({
      op,
      prev,
      next: prev.filter((n) => n.name !== op.node),
      node: op.node,
      // A node the planner saw dead is destroyed without its teardown (infra/remote/teardown.ts).
      teardownEnv: teardownEnv(op, ctx.world.endpoints),
    }),
  );
  const via = op.deleteNodeVia;
  if (via) {
    // Not fatal: the next pass finds the Node without a machine (its Lease goes stale) and deletes it.
    const kube = await ctx.edges.nodes.kube();
    await ctx
      .timed("kube", "delete-node", op.node, () => kube.deleteNode(via, op.node))
      .catch((e: Error) =>
        ctx.report({
          type: "phase",
          phase: "kube",
          operation: "delete-node",
          node: op.node,
          ms: 0,
          ok: false,
          detail:
            `the Node could not be deleted now (${e.message.split("\n")[0]}); it is deleted once its Lease is ` +
            `stale`,
        }),
      );
  }
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
