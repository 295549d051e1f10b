// The rollout's hold on its stack, in the two lines the loop needs: take the lease (and say
// where it lives and whose dead lease it took), and clear what a dead run's engine left. The
// lease itself is orchestrator/lock.ts; the engine's lock orchestrator/stack/engine-lock.ts.
//
// The loop's part when the lease is lost (`signal` aborts): rollout.ts checks it at the top of
// every pass (the boundary between operations), its waits end early through it, and it is
// part of the run's signal that cancels an engine step in flight (stack/engine-process.ts),
// terminated if it has not stopped within half the safety margin. The run ends "failed",
// with the reason, before another runner can take the stack.
import type { Stack } from "@pulumi/pulumi/automation";
import type { RolloutEvent } from "./events";
import { acquireLock, lossMarginMs, type HeldLock } from "./lock";
import { openStore } from "./backend/store";
import { canBindEngines } from "./stack/engine-bind";
import { stopEnginesNow } from "./stack/engine-process";
import { settleEngineLock } from "./stack/engine-lock";

export interface StackLock extends HeldLock {
  /** Waits out or removes the engine lock a dead run left (after the stack is open). */
  settleEngine(stack: Stack, deadlineSeconds: number): Promise<void>;
  /** The summary reason once the lease is lost. */
  lostReason(): string;
}

export async function holdStack(
  backend: string,
  stackName: string,
  ttlSeconds: number,
  emit: (e: RolloutEvent) => void,
  env: Record<string, string | undefined> = {},
): Promise<StackLock> {
  const shared = openStore(backend, env);
  // Engines die with their molt where another machine may have to prove them dead (buckets).
  const bind = shared !== undefined && !backend.startsWith("file://") && canBindEngines();
  const lock = await acquireLock(backend, stackName, "rollout", {
    ttlSeconds,
    env,
    engineBound: bind,
    onRenewError: (e) => emit({ type: "lock-renew-failed", message: e.message.split("\n")[0] }),
  });
  emit({
    type: "lock",
    where: lock.where,
    scope: lock.scope,
    ttlSeconds,
    runId: lock.holder.runId,
    engineBound: lock.holder.engineBound,
  });
  const r = lock.recoveredFrom;
  if (r)
    emit({
      type: "lock-recovered",
      previousPid: r.holder.pid ?? 0,
      previousStartedAt: r.holder.startedAt ?? "unknown",
      previousHost: r.holder.host ?? "unknown",
      ...(r.holder.runId ? { previousRunId: r.holder.runId } : {}),
      reason: r.reason,
      ...(r.silentSeconds !== undefined ? { silentSeconds: r.silentSeconds } : {}),
    });
  // The run's signal gives an engine step in flight the engine's graceful cancel at once; once
  // half the safety margin is gone it is terminated (stopEnginesNow: a second SIGINT, then killed).
  void lock.lost.then((e) => {
    emit({ type: "lock-lost", message: e.message });
    setTimeout(() => stopEnginesNow(), lossMarginMs(ttlSeconds) / 2).unref();
  });
  return {
    ...lock,
    // The run's result stands when the lease cannot be given up: it expires by itself.
    release: () =>
      lock.release().catch((e: unknown) =>
        emit({
          type: "lock-release-failed",
          message:
            `${(e as Error).message.split("\n")[0]}; ` +
            `the lease expires by itself ${ttlSeconds}s after its last renewal`,
        }),
      ),
    settleEngine: async (stack, deadlineSeconds) => {
      if (!shared) return; // Pulumi Cloud and other services keep their engine lock themselves.
      const cleared = await settleEngineLock({
        store: shared,
        stack: stackName,
        ...(lock.recoveredFrom ? { recovered: lock.recoveredFrom } : {}),
        deadlineSeconds,
        cancel: () => stack.cancel(),
        signal: lock.signal,
      });
      if (cleared.length)
        emit({
          type: "engine-lock-cleared",
          locks: cleared.map((l) => ({ host: l.hostname ?? "?", pid: l.pid ?? 0, since: l.timestamp ?? "?" })),
        });
    },
    lostReason: () =>
      `${(lock.signal.reason as Error)?.message ?? "the lock was lost"}; stopped at a boundary between operations ` +
      `(a running engine was interrupted). Run again: the next run resumes once it holds the stack.`,
  };
}
