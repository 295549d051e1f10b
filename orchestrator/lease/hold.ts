// The rollout's hold on its stack, in the two lines the loop needs: take the lease (and say
// where it lives and whose dead lease it took), and clear what a dead run's engine left. The
// lease itself is orchestrator/lease/bucket.ts; the engine's lock orchestrator/stack/engine-lock.ts.
//
// The loop's part when the lease is lost (`signal` aborts): rollout.ts checks it at the top of
// every pass (the boundary between operations), its waits end early through it, and it is
// part of the run's signal that cancels an engine step in flight (stack/engine-process.ts),
// terminated if it has not stopped within half the safety margin. The run ends "failed",
// with the reason, before another runner can take the stack.
import type { Stack } from "@pulumi/pulumi/automation";
import type { Edges } from "../core/edges";
import type { RolloutEvent } from "../events";
import { acquireLock, lossMarginMs, machineStore, type HeldLock } from "./bucket";
import { acquireClusterLock, ClusterLockUnavailableError } from "./cluster";
import { EtcdUnreachableError } from "../edges/etcd";
import { AnotherUpdateInProgressError } from "../stack/state-changed";
import { openStore, redactUrl, STORE_SCHEMES } from "../backend/store";
import type { ObjectStore } from "../backend/object-store";
import type { StackConfig } from "../config";
import { BackendError } from "../stack/driver";
import { canBindEngines } from "../stack/engine-bind";
import { stopEnginesNow } from "../stack/engine-process";
import { settleEngineLock } from "../stack/engine-lock";

export interface StackLock extends HeldLock {
  /**
   * Waits out or removes the engine lock a dead run left (after the stack is open). True
   * when there was one: an engine may have changed the state until then.
   */
  settleEngine(stack: Stack, deadlineSeconds: number): Promise<boolean>;
  /** The summary reason once the lease is lost. */
  lostReason(): string;
  /**
   * Where the cluster holds the lease (molt:lock.in cluster; Pulumi Cloud and gs:// by
   * default): takes it in the cluster's etcd once the stack has nodes. Called before the
   * run's first change and before every change until it holds; a no-op once it does, and
   * for leases beside the state.
   */
  holdInCluster(edges: Edges, o?: { whenReachable?: boolean }): Promise<void>;
  /** The lease lives in the cluster: every `up` is guarded by the state's token (infra/guard.ts). */
  readonly guarded: boolean;
}

/** Where a stack's lease lives: beside the state where molt can write there, else in the cluster. */
export function leaseHome(
  backend: string,
  lockIn: "backend" | "cluster" | undefined,
  env: Record<string, string | undefined> = {},
): "backend" | "cluster" {
  return leaseHomeOf(backend, lockIn, openStore(backend, env) !== undefined);
}

/** leaseHome, for a caller that opened the backend's store already: `shared` when it has one. */
export function leaseHomeOf(
  backend: string,
  lockIn: "backend" | "cluster" | undefined,
  shared: boolean,
): "backend" | "cluster" {
  if (lockIn === "backend" && !shared)
    throw new BackendError(
      redactUrl(backend),
      `molt:lock.in is "backend", but molt cannot keep a lease in this backend (only in ${STORE_SCHEMES} ones); ` +
        `set molt:lock.in to "cluster" (the lease then lives in the cluster's etcd) or remove the key`,
    );
  return lockIn ?? (shared ? "backend" : "cluster");
}

export interface HoldOptions {
  backend: string;
  stack: string;
  /** molt:lock.seconds (the lease's time to live) and molt:lock.in. */
  cfg: Pick<StackConfig, "lockSeconds" | "lockIn">;
  emit: (e: RolloutEvent) => void;
  env?: Record<string, string | undefined>;
  /** Who holds it ("rollout", "verify", "disown"), as the lease's record says. */
  command: string;
  /** The backend's object store (backend/store.ts openStore), undefined where molt has none. */
  store: ObjectStore | undefined;
}

export async function holdStack(o: HoldOptions): Promise<StackLock> {
  const { backend, stack: stackName, emit, env = {}, command, store: shared } = o;
  const ttlSeconds = o.cfg.lockSeconds;
  const home = leaseHomeOf(backend, o.cfg.lockIn, shared !== undefined);
  // Engines die with their molt where another machine may have to prove them dead (buckets).
  // (And wherever the cluster holds the lease: another machine takes it over once it expired.)
  const bind = (shared !== undefined || home === "cluster") && !backend.startsWith("file://") && canBindEngines();
  const onRenewError = (e: Error) =>
    emit({ type: "lock-renew-failed", message: ((e as { detail?: string }).detail ?? e.message).split("\n")[0] });
  // In the cluster: this machine's lease first (the cluster's is taken once its etcd can be reached).
  const base = await acquireLock(backend, stackName, command, {
    ttlSeconds,
    env,
    engineBound: bind,
    onRenewError,
    ...(home === "cluster"
      ? { store: machineStore(), scope: "machine" as const }
      : { store: shared!, scope: "backend" as const }),
  });
  const announce = (l: HeldLock, scope: "backend" | "cluster" | "cluster-pending" | "machine") => {
    emit({ type: "lock", where: l.where, scope, ttlSeconds, runId: l.holder.runId, engineBound: l.holder.engineBound });
    const r = l.recoveredFrom;
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
  };
  if (home === "backend") announce(base, base.scope);

  // One signal for the run, whichever lease is lost.
  const controller = new AbortController();
  let resolveLost!: (e: Awaited<HeldLock["lost"]>) => void;
  const lost = new Promise<Awaited<HeldLock["lost"]>>((r) => (resolveLost = r));
  const follow = (l: HeldLock) =>
    void l.lost.then((e) => {
      if (controller.signal.aborted) return;
      controller.abort(e);
      resolveLost(e);
      emit({ type: "lock-lost", message: e.message });
      // The run's signal gives an engine step in flight the engine's graceful cancel at once; once
      // half the safety margin is gone it is terminated (stopEnginesNow: a second SIGINT, then killed).
      setTimeout(() => stopEnginesNow(), lossMarginMs(ttlSeconds) / 2).unref();
    });
  follow(base);
  let cluster: HeldLock | undefined;
  let pendingAnnounced = false;
  const current = () => cluster ?? base;

  return {
    get where() {
      return current().where;
    },
    get scope() {
      return current().scope;
    },
    get holder() {
      return current().holder;
    },
    ttlSeconds,
    guarded: home === "cluster",
    get recoveredFrom() {
      return current().recoveredFrom;
    },
    signal: controller.signal,
    lost,
    // The run's result stands when the lease cannot be given up: it expires by itself.
    release: async () => {
      for (const l of [cluster, base])
        await l?.release().catch((e: unknown) =>
          emit({
            type: "lock-release-failed",
            message:
              `${(e as Error).message.split("\n")[0]}; ` +
              `the lease expires by itself ${ttlSeconds}s after its last renewal`,
          }),
        );
    },
    holdInCluster: async (edges, o = {}) => {
      if (home !== "cluster" || cluster || controller.signal.aborted) return;
      const state = await edges.stack.state();
      if (state.nodes.length === 0) {
        // No cluster yet: the first node's engine run is the only change before its etcd can hold the lease.
        if (!pendingAnnounced) announce(base, "cluster-pending");
        pendingAnnounced = true;
        return;
      }
      let kv;
      try {
        await edges.nodes.sync(state);
        kv = (await edges.nodes.etcd()).leaseKv();
      } catch (e) {
        // A host key that does not match, refused credentials: their own errors, not "unavailable".
        if (!(e instanceof EtcdUnreachableError)) throw e;
        if (o.whenReachable) return; // a new first node's etcd not up yet: the next pass tries again
        throw new ClusterLockUnavailableError(stackName, (e as Error).message.split("\n")[0]);
      }
      let taken: HeldLock;
      try {
        taken = await acquireClusterLock(kv, stackName, command, {
          ttlSeconds,
          engineBound: base.holder.engineBound,
          onRenewError,
        });
      } catch (e) {
        if (o.whenReachable && e instanceof ClusterLockUnavailableError) return;
        throw e;
      }
      // The stack's nodes may be those of a first `up` still under way on another runner (its
      // outputs are written before it ends): a service that lists the update stops this run,
      // unless the lease just taken was that of a run whose engines died with it.
      if (!shared && (await edges.stack.updateInProgress?.())) {
        const r = taken.recoveredFrom;
        if (r?.reason === "expired" && r.holder.engineBound && edges.stack.cancelUpdate) {
          await edges.stack.cancelUpdate();
          emit({
            type: "engine-lock-cleared",
            locks: [{ host: r.holder.host ?? "?", pid: r.holder.pid ?? 0, since: r.holder.startedAt ?? "?" }],
          });
        } else {
          await taken.release().catch(() => undefined);
          throw new AnotherUpdateInProgressError(stackName, "the backend lists an update of it under way");
        }
      }
      cluster = taken;
      follow(cluster);
      announce(cluster, "cluster");
    },
    settleEngine: async (stack, deadlineSeconds) => {
      if (!shared) return false; // Pulumi Cloud and other services keep their engine lock themselves.
      const recovered = current().recoveredFrom;
      const cleared = await settleEngineLock({
        store: shared,
        stack: stackName,
        ...(recovered ? { recovered } : {}),
        deadlineSeconds,
        cancel: () => stack.cancel(),
        signal: controller.signal,
      });
      if (cleared.length)
        emit({
          type: "engine-lock-cleared",
          locks: cleared.map((l) => ({ host: l.hostname ?? "?", pid: l.pid ?? 0, since: l.timestamp ?? "?" })),
        });
      return cleared.length > 0;
    },
    lostReason: () =>
      `${(controller.signal.reason as Error)?.message ?? "the lock was lost"}; ` +
      "stopped at a boundary between operations " +
      `(a running engine was interrupted). Run again: the next run resumes once it holds the stack.`,
  };
}
