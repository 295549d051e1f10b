// How long the planner's waits may last, and which refusals of etcd mean "not now".
import type { Intent, WaitKey } from "../model";
import { STALE_LEASE_SECONDS } from "./rules";

/**
 * How long a wait may last before its key expires: a join has the join deadline; the
 * kube-proxy rollout after an upgrade moves pods on every node of the cluster (workers
 * too), like a drain; a Node left by a destroyed machine has its Lease's time to go stale
 * first; anything else is a transient condition.
 */
export function waitDeadlineSeconds(key: WaitKey, t: Intent["timeouts"]): number {
  // A new node's target passes the load balancer's health check within the join deadline.
  if (key.startsWith("join:") || key.startsWith("lb:")) return t.joinSeconds;
  if (key.startsWith("soak:")) return t.soakSeconds ?? 0;
  if (key.startsWith("step-soak:")) return t.stepSoakSeconds ?? 0;
  if (key === "addons") return Math.max(t.settleSeconds, t.drainSeconds);
  // A Node whose machine molt destroyed: its kubelet renewed the Lease until the machine went
  // (a join killed after the Node registered), and only STALE_LEASE_SECONDS later does the
  // Lease say no kubelet is left. The settle deadline counts from then, or a settle deadline
  // shorter than STALE_LEASE_SECONDS refused a Node that was about to go.
  if (key.startsWith("stale-node:")) return STALE_LEASE_SECONDS + t.settleSeconds;
  return t.settleSeconds;
}

/**
 * etcd errors that mean "not now" rather than "no": its own guards (a member connected
 * for less than 5 s does not count as active; a learner not yet in sync; a leader
 * election) refuse for a moment. A membership call refused this way is observed again and
 * retried within the settle deadline; anything else stops the run.
 */
const TRANSIENT_ETCD_REFUSALS = new RegExp(
  [
    "unhealthy cluster",
    "not in sync",
    "too many learner",
    "leader changed",
    "no leader",
    "timed out",
    "deadline exceeded",
    "UNAVAILABLE",
    "request timed out",
  ].join("|"),
  "i",
);

export function isTransientEtcdRefusal(message: string): boolean {
  return TRANSIENT_ETCD_REFUSALS.test(message);
}
