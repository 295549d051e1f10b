// Kubernetes steps of a retirement and of an upgrade, each through the API server the
// planner named.
import { DeadlineError, pollUntil } from "../../lib/poll";
import type { Act } from "./context";

export const updateClusterConfig: Act<"update-cluster-config"> = async (op, ctx) => {
  const kube = await ctx.edges.nodes.kube();
  await ctx.timed("kube", op.kind, undefined, () => kube.setClusterConfigVersion(op.via, op.version));
  return { kind: "done" };
};

export const deleteNode: Act<"delete-node"> = async (op, ctx) => {
  const kube = await ctx.edges.nodes.kube();
  await ctx.timed("kube", op.kind, op.node, () => kube.deleteNode(op.via, op.node));
  return { kind: "done" };
};

export const stopApiServer: Act<"stop-apiserver"> = async (op, ctx) => {
  const kube = await ctx.edges.nodes.kube();
  await ctx.timed("kube", op.kind, op.node, () =>
    // The API server serves for its shutdown delay before it stops listening.
    kube.stopApiServer(
      op.node,
      ctx.intent.timeouts.settleSeconds + (ctx.intent.apiServerShutdownDelaySeconds ?? 0),
      ctx.signal,
    ),
  );
  return { kind: "done" };
};

export const updateAddons: Act<"update-addons"> = async (op, ctx) => {
  const kube = await ctx.edges.nodes.kube();
  await ctx.timed("kube", op.kind, undefined, () => kube.updateAddons(op.via, op.kubeadmNode, op.version));
  return { kind: "done" };
};

/**
 * Cordons the node and evicts its pods through the Eviction API until none is left, or
 * the drain deadline passes: then the run stops with what blocked it, nothing removed.
 * Evictions a PodDisruptionBudget refuses (429) are retried, as kubectl drain does.
 */
export const drain: Act<"drain"> = async (op, ctx) => {
  const kube = await ctx.edges.nodes.kube();
  const seconds = ctx.intent.timeouts.drainSeconds;
  let last = { remaining: 0, blocked: [] as string[] };
  try {
    await ctx.timed("kube", op.kind, op.node, async () => {
      await kube.cordon(op.via, op.node);
      await pollUntil(
        async () => {
          last = await kube.evictRound(op.via, op.node);
          return last.remaining === 0 ? true : undefined;
        },
        {
          what: `the drain of ${op.node}`,
          deadlineMs: seconds * 1000,
          intervalMs: 1000,
          maxIntervalMs: 1000,
          signal: ctx.signal,
        },
      );
    });
  } catch (e) {
    // Cancelled: the loop stops at this boundary; the node stays cordoned and a rerun drains on.
    if ((e as Error).name === "AbortError") return { kind: "done" };
    if (!(e instanceof DeadlineError)) throw e;
    const blocked =
      last.blocked.length > 0
        ? `evictions refused: ${last.blocked.join("; ")}`
        : `${last.remaining} pod(s) still on the node (terminating or not evictable)`;
    return {
      kind: "stop",
      result: "failed",
      reason:
        `drain of ${op.node} did not finish within ${seconds}s (molt:timeouts.drainSeconds): ${blocked}. ` +
        `No node was removed: ${op.node} stays cordoned and every etcd member is in place. Let the ` +
        `PodDisruptionBudget allow the eviction ` +
        `(or raise the deadline), then run molt again: it continues with the drain.`,
    };
  }
  return { kind: "done" };
};
