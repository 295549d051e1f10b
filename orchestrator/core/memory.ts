// The loop's own memory across passes (waits and their deadlines, the node being joined,
// a rollback in progress, the count of changes) as one value, advanced by pure functions.
// The loop and the planner simulator in the tests use the same functions.
import type { RolloutResultKind } from "./model";
import type { Intent, Operation, RunControls, WaitKey, WorldMemory } from "./model";
import { waitDeadlineSeconds } from "./plan";

export interface LoopMemory {
  /** When each wait began (ms since the epoch). */
  waits: Partial<Record<WaitKey, number>>;
  /** Waits whose deadline has passed: the planner decides differently once a key is here. */
  expired: WaitKey[];
  /** The node this run added and has not yet seen healthy. */
  joining?: string;
  /** The new node this run is rolling back: why its surge failed, or the rollback's reason. */
  rollingBack?: { node: string; why?: string; reason?: string };
  /** Changes made so far (refused etcd calls that are retried and the ownership claim do not count). */
  operations: number;
  /** The operator controls' memory: retirements done, the node under watch, hooks passed or failed. */
  controls: RunControls;
}

export const initialMemory: LoopMemory = {
  waits: {},
  expired: [],
  operations: 0,
  controls: { retired: [], hooksPassed: [] },
};

/** What acting on an operation came to. */
export type ActOutcome =
  | { kind: "done" }
  /** A surge's `up` failed: the next pass rolls back what it made (or the run pauses). */
  | { kind: "surge-failed"; node: string; why: string }
  /** etcd refused for now (plan/waits.ts isTransientEtcdRefusal): observe again and retry. */
  | { kind: "retry"; key: WaitKey; why: string }
  /** The run stops here with this result. */
  | { kind: "stop"; result: RolloutResultKind; reason: string }
  /** An operator hook failed: the planner decides what follows (plan/control-steps.ts). */
  | { kind: "hook-failed"; why: string };

export interface Stop {
  result: RolloutResultKind;
  reason: string;
}

/** The memory's part of the world the planner sees. */
export function worldMemory(m: LoopMemory, windowClosed?: string): WorldMemory {
  return {
    expired: [...m.expired],
    controls: {
      ...m.controls,
      retired: [...m.controls.retired],
      hooksPassed: [...m.controls.hooksPassed],
      ...(windowClosed ? { windowClosed } : {}),
    },
    ...(m.joining ? { joining: m.joining } : {}),
    ...(m.rollingBack
      ? { rollingBack: { node: m.rollingBack.node, ...(m.rollingBack.why ? { why: m.rollingBack.why } : {}) } }
      : {}),
  };
}

/** A new node stops "joining" once seen as a healthy voter with (with Kubernetes) a healthy control plane. */
export function afterObservation(m: LoopMemory, healthy: (node: string) => boolean): LoopMemory {
  if (!m.joining || !healthy(m.joining)) return m;
  // Seen healthy: it is watched (postJoin hook, soak) until the next retirement. Its join
  // deadline was met: an expiry recorded by the pass before (the deadline passed as it became
  // healthy) must not roll it back later, when an old node may already be drained.
  const key = `join:${m.joining}` as const;
  const waits = { ...m.waits };
  delete waits[key];
  return {
    ...m,
    joining: undefined,
    waits,
    expired: m.expired.filter((k) => k !== key),
    controls: { ...m.controls, watching: m.joining },
  };
}

/**
 * After a decision: a decision other than waiting ends every wait except etcd refusals
 * being retried; a wait starts its clock on its first pass and expires at its deadline
 * (`expiredNow`: the loop decides again at once, without pausing).
 */
export function afterDecision(
  m: LoopMemory,
  op: Operation,
  now: number,
  timeouts: Intent["timeouts"],
): { memory: LoopMemory; expiredNow?: WaitKey } {
  if (op.kind !== "wait") {
    const waits = Object.fromEntries(Object.entries(m.waits).filter(([k]) => k.startsWith("retry:")));
    return { memory: { ...m, waits } };
  }
  const started = m.waits[op.key] ?? now;
  // A soak is continuous: any other wait (the new node unhealthy, a leader election) restarts it.
  const soaking = (k: string) => k.startsWith("soak:") || k.startsWith("step-soak:");
  const kept = soaking(op.key) ? m.waits : Object.fromEntries(Object.entries(m.waits).filter(([k]) => !soaking(k)));
  const memory = { ...m, waits: { ...kept, [op.key]: started } };
  if (now - started > waitDeadlineSeconds(op.key, timeouts) * 1000) {
    return { memory: { ...memory, expired: [...memory.expired, op.key] }, expiredNow: op.key };
  }
  return { memory };
}

/** After acting on a change: the bookkeeping of joins, rollbacks and retries, and whether the run stops. */
export function afterAct(
  m: LoopMemory,
  op: Operation,
  outcome: ActOutcome,
  now: number,
  intent: Intent,
): { memory: LoopMemory; stop?: Stop } {
  // Claiming the cluster's ownership marker is bookkeeping any run does first: it does not turn
  // a refusal after it into a failure "after changes", nor a converged cluster's run into work.
  const counted = op.kind === "claim-ownership" ? m : { ...m, operations: m.operations + 1 };
  switch (outcome.kind) {
    case "retry": {
      const started = m.waits[outcome.key] ?? now;
      const memory = { ...m, waits: { ...m.waits, [outcome.key]: started } };
      if (now - started > waitDeadlineSeconds(outcome.key, intent.timeouts) * 1000)
        return {
          memory,
          stop: {
            result: "failed",
            reason:
              `etcd kept refusing ${op.kind} of ${outcome.key.slice(`retry:${op.kind}:`.length)} for ` +
              `${intent.timeouts.settleSeconds}s: ${outcome.why}`,
          },
        };
      return { memory };
    }
    case "stop":
      return { memory: counted, stop: { result: outcome.result, reason: outcome.reason } };
    case "surge-failed": {
      const key = `join:${outcome.node}` as const;
      const memory: LoopMemory = {
        ...counted,
        expired: [...counted.expired, key],
        rollingBack: { node: outcome.node, why: outcome.why },
        // A prune-and-surge may have written its list (the lab does before the join); when it
        // started at replicas (after --replace-dead, or a memberless node an earlier run left)
        // the count is back at replicas, and only this memory says the node is the new one.
        ...(op.kind === "prune-and-surge" ? { joining: outcome.node } : {}),
      };
      if (intent.rollout.onFailure === "pause")
        return {
          memory,
          stop: {
            result: "paused",
            reason: `new node ${outcome.node} failed to join; left in place for inspection: ${outcome.why}`,
          },
        };
      return { memory };
    }
    case "hook-failed":
      if (op.kind !== "hook") break;
      return {
        memory: { ...m, controls: { ...m.controls, hookFailed: { hook: op.hook, node: op.node, why: outcome.why } } },
      };
    case "done":
      break;
  }
  if (op.kind === "hook")
    return {
      memory: {
        ...counted,
        controls: { ...m.controls, hooksPassed: [...m.controls.hooksPassed, `${op.hook}:${op.node}`] },
      },
    };
  if (op.kind === "remove-member")
    return {
      memory: { ...retried(counted, op), controls: { ...m.controls, retired: [...m.controls.retired, op.node] } },
    };
  if (op.kind === "surge" || op.kind === "create-first" || op.kind === "prune-and-surge")
    return {
      memory: { ...counted, joining: op.entry.name, waits: { ...counted.waits, [`join:${op.entry.name}`]: now } },
    };
  if (op.kind === "rollback")
    return { memory: { ...counted, rollingBack: { ...m.rollingBack, node: op.node, reason: op.reason } } };
  return { memory: retried(counted, op) };
}

/** A membership call that went through ends the clock of its retries. */
function retried(m: LoopMemory, op: Operation): LoopMemory {
  const retryKey = retryKeyOf(op);
  if (!retryKey || m.waits[retryKey] === undefined) return m;
  const waits = { ...m.waits };
  delete waits[retryKey];
  return { ...m, waits };
}

/** The key an etcd membership call's retries are counted under. */
export function retryKeyOf(op: Operation): WaitKey | undefined {
  switch (op.kind) {
    case "promote-learner":
    case "remove-member":
      return `retry:${op.kind}:${op.node}`;
    case "move-leader":
      return `retry:${op.kind}:${op.from}`;
    case "remove-stray-member":
      return `retry:${op.kind}:${op.name}`;
    case "done":
    case "create-first":
    case "surge":
    case "prune":
    case "prune-and-surge":
    case "retire-adopted":
    case "prune-orphans":
    case "wait":
    case "rollback":
    case "pause":
    case "hook":
    case "refuse":
    case "claim-ownership":
    case "update-cluster-config":
    case "drain":
    case "stop-apiserver":
    case "restore-control-plane":
    case "release-vip":
    case "delete-node":
    case "update-addons":
    case "deregister-target":
    case "register-target":
      return undefined;
  }
}

/** The run's end, when the planner's decision ends it (done, refuse, pause); any other is acted on. */
export function endOf(m: LoopMemory, op: Operation): Stop | undefined {
  if (op.kind === "done") {
    if (m.operations === 0) return { result: "noop", reason: `nothing to do: ${op.reason}` };
    // Why the new node was rolled back, and what the rollback left (plan/decide.ts cleanUpFailedSurge).
    if (m.rollingBack)
      return {
        result: "rolled-back",
        reason: m.rollingBack.reason ? `${m.rollingBack.reason}; ${op.reason}` : op.reason,
      };
    return { result: "succeeded", reason: op.reason };
  }
  if (op.kind === "refuse")
    return { result: m.operations === 0 ? "refused" : "failed", reason: `${op.condition}: ${op.reason}` };
  if (op.kind === "pause") return { result: "paused", reason: op.reason };
  return undefined;
}
