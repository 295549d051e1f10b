// Kubernetes steps of a retirement and of an upgrade, each through the API server the
// planner named.
import { apiServerGracePeriodSeconds } from "../../infra/kubeadm/grace";
import { DeadlineError, pollUntil } from "../../lib/poll";
import type { Act } from "./context";
import { reportPodsLeft } from "./provision";
import type { KubeEdge } from "../core/edges";
import {
  DRAIN_CHECK_MS,
  DRAIN_ROUND_MS,
  drainTimedOut,
  isEvictable,
  podStep,
  refusedEviction,
  type DrainRound,
} from "../core/drain";

export const updateClusterConfig: Act<"update-cluster-config"> = async (op, ctx) => {
  const kube = await ctx.edges.nodes.kube();
  await ctx.timed("kube", op.kind, undefined, () => kube.setClusterConfigVersion(op.via, op.version));
  return { kind: "done" };
};

export const deleteNode: Act<"delete-node"> = async (op, ctx) => {
  const kube = await ctx.edges.nodes.kube();
  // Planned for a Node whose machine is gone (its Lease stale, no machine in the stack).
  const left = await ctx.timed("kube", op.kind, op.node, () => kube.deleteNode(op.via, op.node, { machineGone: true }));
  reportPodsLeft(op.node, left, ctx);
  return { kind: "done" };
};

export const stopApiServer: Act<"stop-apiserver"> = async (op, ctx) => {
  const kube = await ctx.edges.nodes.kube();
  const warnings = await ctx.timed("kube", op.kind, op.node, () =>
    // The API server serves for its shutdown delay before it stops listening.
    kube.stopApiServer(
      op.node,
      ctx.intent.timeouts.settleSeconds + (ctx.intent.apiServerShutdownDelaySeconds ?? 0),
      ctx.signal,
    ),
  );
  for (const message of warnings) ctx.report({ type: "warning", node: op.node, message });
  return { kind: "done" };
};

export const restoreControlPlane: Act<"restore-control-plane"> = async (op, ctx) => {
  const kube = await ctx.edges.nodes.kube();
  await ctx.timed("kube", op.kind, op.node, async () => {
    // Its stopped API server may finish its shutdown first, within its grace period (infra/kubeadm/grace.ts).
    const grace = apiServerGracePeriodSeconds(ctx.intent.apiServerShutdownDelaySeconds ?? 0);
    await kube.restoreControlPlane(op.node, op.manifests, ctx.intent.timeouts.settleSeconds + grace, ctx.signal);
    // The next passes wait for its control plane to be healthy again (plan/kube-steps.ts).
    if (op.uncordon) await kube.uncordon(op.via, op.node);
  });
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
 * Which pods go, which are refused, the rounds' pace and the messages: core/drain.ts.
 */
export const drain: Act<"drain"> = async (op, ctx) => {
  const kube = await ctx.edges.nodes.kube();
  const seconds = ctx.intent.timeouts.drainSeconds;
  let last: DrainRound = { remaining: 0, blocked: [] };
  try {
    await ctx.timed("kube", op.kind, op.node, async () => {
      await kube.cordon(op.via, op.node);
      // Evictions once a round; between rounds, only whether the pods are gone is looked at.
      let roundAt = -Infinity;
      await pollUntil(
        async () => {
          if (Date.now() - roundAt >= DRAIN_ROUND_MS) {
            roundAt = Date.now();
            last = await evictRound(kube, op.via, op.node);
          } else {
            last = { ...last, remaining: (await kube.podsOn(op.via, op.node)).filter(isEvictable).length };
          }
          return last.remaining === 0 ? true : undefined;
        },
        {
          what: `the drain of ${op.node}`,
          deadlineMs: seconds * 1000,
          intervalMs: DRAIN_CHECK_MS,
          maxIntervalMs: DRAIN_CHECK_MS,
          signal: ctx.signal,
        },
      );
    });
  } catch (e) {
    // Cancelled: the loop stops at this boundary; the node stays cordoned and a rerun drains on.
    if ((e as Error).name === "AbortError" && ctx.signal?.aborted) return { kind: "done" };
    if (!(e instanceof DeadlineError)) throw e;
    return { kind: "stop", result: "failed", reason: drainTimedOut(op.node, seconds, last) };
  }
  return { kind: "done" };
};

/** One round over the node's evictable pods, each as the policy says: wait for it, evict it, or refuse. */
export async function evictRound(kube: KubeEdge, via: string, node: string): Promise<DrainRound> {
  const pods = (await kube.podsOn(via, node)).filter(isEvictable);
  const blocked: string[] = [];
  await Promise.all(
    pods.map(async (p) => {
      const step = podStep(p);
      if (step.kind === "refuse") blocked.push(step.reason);
      if (step.kind !== "evict") return;
      const r = await kube.evict(via, step.namespace, step.name);
      if (r.kind === "refused") blocked.push(refusedEviction(step.namespace, step.name, r.message));
    }),
  );
  return { remaining: pods.length, blocked };
}
