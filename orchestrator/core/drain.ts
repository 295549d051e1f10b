// The drain policy, in one place: which pods a drain evicts, which it refuses to evict, how
// its rounds are paced and for how long, and when the planner drains a node before retiring
// it. The planner (core/plan/change-steps.ts) and the drain act (act/kube.ts) read it; the
// Kubernetes edge lists pods and makes the evictions it is asked for, deciding nothing.
import type { KubeNode } from "./observations";

/** What a drain reads of a pod: the fields of the API's Pod it decides on. */
export interface PodLike {
  metadata?: {
    name?: string;
    namespace?: string;
    annotations?: Record<string, string>;
    ownerReferences?: { kind?: string; controller?: boolean }[];
    deletionTimestamp?: Date | string;
  };
  status?: { phase?: string };
}

/** Pods `kubectl drain --ignore-daemonsets` evicts: not mirror pods, DaemonSet pods or finished pods. */
export function isEvictable(p: PodLike): boolean {
  if (p.metadata?.annotations?.["kubernetes.io/config.mirror"]) return false;
  if (p.metadata?.ownerReferences?.some((o) => o.kind === "DaemonSet")) return false;
  return p.status?.phase !== "Succeeded" && p.status?.phase !== "Failed";
}

/** What a drain round does with one evictable pod. */
export type PodStep =
  /** Terminating already: it counts until it is gone, and nothing more is asked of it. */
  | { kind: "wait" }
  /** An eviction through the Eviction API (PodDisruptionBudgets honoured). */
  | { kind: "evict"; namespace: string; name: string }
  /** Not evicted: why, said to the user when the drain runs out of time. */
  | { kind: "refuse"; reason: string };

export function podStep(p: PodLike): PodStep {
  if (p.metadata?.deletionTimestamp) return { kind: "wait" };
  const name = p.metadata?.name ?? "";
  const namespace = p.metadata?.namespace ?? "";
  // Like kubectl drain without --force: a pod no controller recreates would be lost.
  if (!p.metadata?.ownerReferences?.some((o) => o.controller))
    return {
      kind: "refuse",
      reason:
        `${namespace}/${name}: not managed by a controller, so an eviction would lose it for good (kubectl ` +
        `drain refuses it without --force); move or delete it yourself`,
    };
  return { kind: "evict", namespace, name };
}

/** An eviction the API refused (429: a PodDisruptionBudget), as a drain reports it. */
export function refusedEviction(namespace: string, name: string, message: string): string {
  return `${namespace}/${name}: ${message}`;
}

/** What one round left: pods still on the node, and why some were not evicted. */
export interface DrainRound {
  remaining: number;
  blocked: string[];
}

/**
 * The rounds' pace: one a second (a refused eviction is asked again each round, as kubectl
 * drain retries a 429), until none is left or molt:timeouts.drainSeconds passes.
 */
export const DRAIN_ROUND_MS = 1000;

/** Between rounds, the node's pods are listed this often: a drain ends when its last pod has gone. */
export const DRAIN_CHECK_MS = 100;

/** When the planner drains a node it retires: its Node still takes pods, or has pods to evict. */
export function needsDrain(node: Pick<KubeNode, "unschedulable"> | undefined, evictable: number): boolean {
  return node !== undefined && (!node.unschedulable || evictable > 0);
}

export function drainReason(node: string, evictable: number): string {
  return `retire ${node}: cordon and drain it first (${evictable} pod(s) to evict, PodDisruptionBudgets honoured)`;
}

/** Why the run stops when a drain did not finish in time: nothing was removed, and what to do. */
export function drainTimedOut(node: string, seconds: number, last: DrainRound): string {
  const blocked =
    last.blocked.length > 0
      ? `evictions refused: ${last.blocked.join("; ")}`
      : `${last.remaining} pod(s) still on the node (terminating or not evictable)`;
  return (
    `drain of ${node} did not finish within ${seconds}s (molt:timeouts.drainSeconds): ${blocked}. ` +
    `No node was removed: ${node} stays cordoned and every etcd member is in place. Let the ` +
    `PodDisruptionBudget allow the eviction ` +
    `(or raise the deadline), then run molt again: it continues with the drain.`
  );
}
