// One rollout per stack, seen by every runner that shares the stack's backend: a lease in
// the backend's own object store (orchestrator/backend/store.ts), `.molt/locks/<stack>.json`.
//  - The holder (host, pid, run id, start) renews it three times per (ttl - margin) with a
//    conditional write on the version it last wrote; a lease not renewed for `ttlSeconds`, by
//    the store's own clock, has expired. A process that died on this machine (same host, boot and pid namespace) is
//    known dead at once.
//  - Taking a dead or expired lease is one conditional write on the version that was judged
//    dead: of two runners taking it at once exactly one wins, and the taker reports whose
//    lease it took.
//  - A holder that cannot renew before `ttl - margin` (its own monotonic clock, counted from
//    the send of its last successful renewal) has lost the lease: `signal` aborts and `lost`
//    resolves, before any other runner can take the lease over. The loop stops at its next
//    boundary, and the engine it runs is stopped (orchestrator/stack/engine-fence.ts).
//  - Every write is abandoned (its request aborted) by a deadline, and says by the store's
//    clock when it must land to count (`landBy`) and when the lease expires if it lands later
//    (`heldUntil`): a write a frozen store processes only after its writer gave it up (or died)
//    extends nothing, though it carries the writer's name. A holder that gives the lease up
//    (release, lost or not) deletes the version it holds, and any it wrote since, conditionally.
// Backends molt cannot write objects to itself (Pulumi Cloud, gs://) get a lease in ~/.molt:
// it covers this machine only, and the `lock` event says so. file://, s3:// and azblob://
// backends hold it beside the state.
import { randomUUID } from "node:crypto";
import { mkdirSync, readFileSync, readlinkSync } from "node:fs";
import { hostname } from "node:os";
import { alive } from "../../lib/process";
import { FileStore } from "../backend/file";
import { openStore } from "../backend/store";
import { STORE_CALL_MS, storeTimeAtMost, type CallOptions, type ObjectStore } from "../backend/object-store";
import { moltHome } from "../stack/engine";

export interface LockHolder {
  host: string;
  pid: number;
  runId: string;
  startedAt: string;
  command: string;
  /** The kernel boot and pid namespace: with the host name, "a pid on this machine". */
  machine: string;
  /** The run's engine processes die with it (parent-death signal): its engine lock is provably dead with it. */
  engineBound: boolean;
}

interface LeaseRecord {
  kind: "molt-lease";
  holder: LockHolder;
  ttlSeconds: number;
  renewedAt: string;
  /** Store clock (ms): this write renews the lease only if it landed by then; its writer abandoned it after. */
  landBy?: number;
  /** Store clock (ms): when the lease expires if this write landed after `landBy` (0: it held nothing before). */
  heldUntil?: number;
}

export const DEFAULT_TTL_SECONDS = 30;

export class ConcurrentRolloutError extends Error {
  constructor(
    readonly stackName: string,
    readonly holder: Partial<LockHolder>,
    readonly where: string,
    /** Seconds until the lease expires unless renewed (undefined: held by a live process here). */
    readonly expiresInSeconds?: number,
    /** The lease's time to live. */
    readonly ttlSeconds?: number,
  ) {
    super(
      `another molt run holds stack "${stackName}" (pid ${holder.pid} on ${holder.host}, run ${holder.runId ?? "?"}, ` +
        `${holder.command ?? "?"}, since ${holder.startedAt ?? "?"}; lock ${where}); nothing was changed. ` +
        (expiresInSeconds === undefined
          ? "Wait for it to finish."
          : `Wait for it to finish: if it died, its lease expires in ${Math.max(1, Math.ceil(expiresInSeconds))}s ` +
            `(${ttlSeconds ?? "its time to live in"}s after its last renewal) and the next run takes the stack over ` +
            "(no file to remove by hand)."),
    );
    this.name = "ConcurrentRolloutError";
  }
}

export class LeaseLostError extends Error {
  constructor(
    readonly stackName: string,
    detail: string,
  ) {
    super(`this run lost its lock on stack "${stackName}": ${detail}`);
    this.name = "LeaseLostError";
  }
}

export interface HeldLock {
  /** Where the lease lives (the backend's store, or this machine's ~/.molt). */
  where: string;
  /**
   * "backend": every runner of the backend sees it; "cluster": the cluster's etcd holds it
   * (orchestrator/lease/cluster.ts), seen by every runner that reaches the cluster; "machine":
   * only this machine does.
   */
  scope: "backend" | "cluster" | "machine";
  holder: LockHolder;
  ttlSeconds: number;
  /** Set when a dead or expired lease was taken over: whose, and why it was free. */
  recoveredFrom?: {
    holder: Partial<LockHolder>;
    reason: "process-gone" | "expired";
    renewedAt?: string;
    /** How long it had not been renewed, by the store's clock (expired only). */
    silentSeconds?: number;
  };
  /** Aborted when the lease is lost: stop at the next boundary. */
  signal: AbortSignal;
  /** Resolves (never rejects) with the reason, once the lease is lost. */
  lost: Promise<LeaseLostError>;
  /** Gives the lease up (a conditional delete of the version this run holds). */
  release(): Promise<void>;
}

export interface LockOptions {
  ttlSeconds?: number;
  engineBound?: boolean;
  /** The store to use (default: the backend's, else ~/.molt). */
  store?: ObjectStore;
  /** What `store` covers (default "backend"). */
  scope?: HeldLock["scope"];
  /** The engine's environment (credentials for the backend's store, when given there). */
  env?: Record<string, string | undefined>;
  /** Overrides of the holder's identity (tests play two runners in one process). */
  identity?: Partial<Pick<LockHolder, "host" | "pid" | "machine">>;
  /** A renewal failed but the lease is not lost yet (it is retried). */
  onRenewError?: (e: Error) => void;
}

export function lockKey(stack: string): string {
  return `.molt/locks/${stack}.json`;
}

/** The store that holds the stack's lease, and whether every runner of the backend sees it. */
export function lockStore(
  backendUrl: string,
  env: Record<string, string | undefined> = {},
): { store: ObjectStore; scope: HeldLock["scope"] } {
  const store = openStore(backendUrl, env);
  if (store) return { store, scope: "backend" };
  return { store: machineStore(), scope: "machine" };
}

/** This machine's own lease store (~/.molt). */
export function machineStore(): ObjectStore {
  mkdirSync(moltHome(), { recursive: true });
  return new FileStore(moltHome());
}

/** The kernel boot id and pid namespace: processes with equal values see the same pids. */
export function machineId(): string {
  let boot = "unknown-boot";
  let pidns = "unknown-pidns";
  try {
    boot = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
  } catch {
    /* not Linux: the host name alone must not prove a process dead */
  }
  try {
    pidns = readlinkSync("/proc/self/ns/pid");
  } catch {
    /* idem */
  }
  return `${boot}/${pidns}`;
}

/** The live lease on a stack, or undefined (for status, tests and the chaos harness). */
export async function readLease(store: ObjectStore, stack: string): Promise<LeaseRecord | undefined> {
  const cur = await store.get(lockKey(stack));
  return cur ? parseRecord(cur.body) : undefined;
}

/**
 * When a lease written at `modified` (store clock, ms) expires by the store's clock: its time to
 * live after the write, or, for a write that landed after its writer abandoned it, what the
 * lease held before (`heldUntil`). The store's clock resolution is added either way.
 */
export function leaseExpiresAt(
  rec: LeaseRecord | undefined,
  modified: number,
  ttlSeconds: number,
  resolutionMs: number,
): number {
  if (rec?.landBy !== undefined && modified > rec.landBy) return (rec.heldUntil ?? 0) + resolutionMs;
  return modified + ttlSeconds * 1000 + resolutionMs;
}

export interface LeaseView {
  record?: LeaseRecord;
  modified: Date;
  /** Store clock (ms). */
  expiresAt: number;
  /** Its last write landed after its writer had abandoned it. */
  landedLate: boolean;
  /** Not expired by the store's clock now. */
  live: boolean;
}

/** The stack's lease as a taker judges it (status, tests, the chaos harness), or undefined. */
export async function inspectLease(store: ObjectStore, stack: string): Promise<LeaseView | undefined> {
  const cur = await store.get(lockKey(stack));
  if (!cur) return undefined;
  const record = parseRecord(cur.body);
  const modified = cur.modified.getTime();
  const expiresAt = leaseExpiresAt(
    record,
    modified,
    record?.ttlSeconds ?? DEFAULT_TTL_SECONDS,
    store.clockResolutionMs,
  );
  const now = (await store.now()).getTime();
  return {
    ...(record ? { record } : {}),
    modified: cur.modified,
    expiresAt,
    landedLate: record?.landBy !== undefined && modified > record.landBy,
    live: now <= expiresAt,
  };
}

function parseRecord(body: Buffer): LeaseRecord | undefined {
  try {
    const r = JSON.parse(body.toString("utf8")) as LeaseRecord;
    return r?.kind === "molt-lease" && r.holder && typeof r.ttlSeconds === "number" ? r : undefined;
  } catch {
    return undefined;
  }
}

/** How long before the lease's expiry its holder gives it up (its clock and the store's may drift apart slightly). */
export function lossMarginMs(ttlSeconds: number): number {
  return Math.max(1000, (ttlSeconds * 1000) / 4);
}

/** Renewals come often enough that two can fail and a third still lands before the holder gives up. */
export function renewIntervalMs(ttlSeconds: number): number {
  return (ttlSeconds * 1000 - lossMarginMs(ttlSeconds)) / 3;
}

export async function acquireLock(
  backendUrl: string,
  stack: string,
  command: string,
  o: LockOptions = {},
): Promise<HeldLock> {
  const { store, scope } = o.store ? { store: o.store, scope: o.scope ?? "backend" } : lockStore(backendUrl, o.env);
  const ttlSeconds = o.ttlSeconds ?? DEFAULT_TTL_SECONDS;
  await store.check();
  // Every write says by the store's clock when it must land: read that clock once first.
  if (storeTimeAtMost(store) === undefined) await store.now();
  const key = lockKey(stack);
  const where = `${key} in ${store.location}`;
  const holder = newHolder(command, o);
  /** This run's record, for a write abandoned at `abandonAt` on a lease held until `heldUntil` (performance.now()). */
  const record = (abandonAt: number, heldUntil?: number): Buffer => {
    const now = performance.now();
    const storeNow = storeTimeAtMost(store, now);
    if (storeNow === undefined) throw new Error(`${store.location} has not told its time: molt cannot stamp a lease`);
    const at = (t: number) => Math.ceil(storeNow + t - now);
    return leaseRecord(holder, ttlSeconds, { landBy: at(abandonAt), heldUntil: heldUntil ? at(heldUntil) : 0 });
  };

  let etag: string | undefined;
  let recoveredFrom: HeldLock["recoveredFrom"];
  let sentAt = performance.now();
  /** One write of the lease within the store's deadline; an answer that came after it counts as none. */
  const write = async (put: (body: Buffer) => Promise<string | undefined>): Promise<string | undefined> => {
    const t = performance.now();
    const abandonAt = t + STORE_CALL_MS;
    const written = await put(record(abandonAt));
    if (!written || performance.now() > abandonAt) return undefined; // the next read finds it (ours)
    sentAt = t;
    return written;
  };
  for (let attempt = 0; attempt < 4 && !etag; attempt++) {
    const cur = await store.get(key);
    if (!cur) {
      etag = await write((b) => store.putIfAbsent(key, b));
      continue;
    }
    const rec = parseRecord(cur.body);
    if (rec?.holder.runId === holder.runId) {
      // Our own write, answered too late to count: written again, on that version.
      etag = await write((b) => store.putIfMatch(key, b, cur.etag));
      continue;
    }
    const other: Partial<LockHolder> = rec?.holder ?? { host: "unknown (unreadable lock)", pid: 0 };
    const otherTtl = rec?.ttlSeconds ?? ttlSeconds;
    let reason: "process-gone" | "expired";
    let silentSeconds: number | undefined;
    if (other.host === holder.host && other.machine === holder.machine && other.pid && other.pid > 0) {
      if (alive(other.pid)) throw new ConcurrentRolloutError(stack, other, where);
      reason = "process-gone";
    } else {
      const now = (await store.now()).getTime();
      const expiresAt = leaseExpiresAt(rec, cur.modified.getTime(), otherTtl, store.clockResolutionMs);
      if (now <= expiresAt)
        throw new ConcurrentRolloutError(
          stack,
          other,
          where,
          (expiresAt - store.clockResolutionMs - now) / 1000,
          otherTtl,
        );
      reason = "expired";
      // Since its last renewal that counted (a write that landed too late renewed nothing).
      silentSeconds = Math.round((now - (expiresAt - store.clockResolutionMs - otherTtl * 1000)) / 100) / 10;
    }
    recoveredFrom = {
      holder: other,
      reason,
      ...(rec?.renewedAt ? { renewedAt: rec.renewedAt } : {}),
      ...(silentSeconds !== undefined ? { silentSeconds } : {}),
    };
    etag = await write((b) => store.putIfMatch(key, b, cur.etag));
    // Else another runner took it first (the next read sees its fresh lease and refuses), or our
    // answer came too late (the next read finds our own record).
  }
  if (!etag) throw new ConcurrentRolloutError(stack, { host: "unknown", pid: 0 }, where, ttlSeconds, ttlSeconds);

  /** Removes every version of the lease this run wrote (a renewal abandoned in flight may have landed). */
  const removeOurs = async (c: CallOptions) => {
    if (await store.delete(key, etag!, c)) return;
    for (let i = 0; i < 3; i++) {
      const cur = await store.get(key, c);
      if (!cur || parseRecord(cur.body)?.holder.runId !== holder.runId) return;
      if (await store.delete(key, cur.etag, c)) return;
    }
  };
  const kept = keepRenewed({
    stack,
    ttlSeconds,
    sentAt,
    ...(o.onRenewError ? { onRenewError: o.onRenewError } : {}),
    // Conditional: a lease taken over meanwhile is the new holder's and stays.
    giveUp: (signal) => removeOurs({ signal }),
    renew: async ({ signal, abandonAt, expiresAt }) => {
      const next = await store.putIfMatch(key, record(abandonAt, expiresAt), etag!, { signal });
      if (next) {
        etag = next;
        return { kind: "renewed" };
      }
      const now = await store.get(key, { signal }).catch(() => undefined);
      const by = now ? parseRecord(now.body)?.holder : undefined;
      if (now && by?.runId === holder.runId) {
        // An earlier renewal landed although its answer was lost: the lease is still ours.
        // Renew again at once on that version; only an answered renewal re-arms the deadline.
        etag = now.etag;
        return { kind: "again" };
      }
      return {
        kind: "lost",
        detail: by ? `run ${by.runId} (pid ${by.pid} on ${by.host}) took it over after it expired` : "it was removed",
      };
    },
  });

  return { where, scope, holder, ttlSeconds, ...(recoveredFrom ? { recoveredFrom } : {}), ...kept };
}

/** This run's identity in a lease (the overrides are for tests playing two runners). */
export function newHolder(command: string, o: Pick<LockOptions, "identity" | "engineBound"> = {}): LockHolder {
  return {
    host: o.identity?.host ?? hostname(),
    pid: o.identity?.pid ?? process.pid,
    runId: randomUUID(),
    startedAt: new Date().toISOString(),
    command,
    machine: o.identity?.machine ?? machineId(),
    engineBound: o.engineBound ?? false,
  };
}

/** A lease's record; a fresh timestamp on every write, so no two writes have the same bytes. */
export function leaseRecord(
  holder: LockHolder,
  ttlSeconds: number,
  times: Pick<LeaseRecord, "landBy" | "heldUntil"> = {},
): Buffer {
  return Buffer.from(
    JSON.stringify({
      kind: "molt-lease",
      holder,
      ttlSeconds,
      renewedAt: new Date().toISOString(),
      ...times,
    } satisfies LeaseRecord),
  );
}

export function parseLeaseRecord(body: Buffer): LeaseRecord | undefined {
  return parseRecord(body);
}

/** What one renewal did: renewed (re-arms the deadline), must be repeated at once, or found the lease gone. */
export type RenewResult = { kind: "renewed" } | { kind: "again" } | { kind: "lost"; detail: string };

/** One renewal: abandoned when `signal` aborts, at `abandonAt` at the latest (performance.now()). */
export interface RenewAttempt {
  signal: AbortSignal;
  abandonAt: number;
  /** When the lease expires as its holder knows it (performance.now()): its last answered renewal's send + ttl. */
  expiresAt: number;
}

/**
 * The holder's side of any lease: renews every renewIntervalMs, and gives the lease up
 * lossMarginMs before it could expire, counted on this process's monotonic clock from the
 * send of the last answered renewal (`sentAt`: the acquisition's). A renewal is abandoned (its
 * requests aborted) by the time the holder would give up, or STORE_CALL_MS after it began, and
 * when the lease is lost or released; an answer after that renews nothing. `release()` ends the
 * renewals and gives the lease up with `giveUp` (also after a loss: it removes only what is
 * still this holder's).
 */
export function keepRenewed(o: {
  stack: string;
  ttlSeconds: number;
  sentAt: number;
  renew: (attempt: RenewAttempt) => Promise<RenewResult>;
  giveUp: (signal: AbortSignal) => Promise<void>;
  onRenewError?: (e: Error) => void;
}): Pick<HeldLock, "signal" | "lost" | "release"> {
  const { stack, ttlSeconds } = o;
  const controller = new AbortController();
  let resolveLost!: (e: LeaseLostError) => void;
  const lost = new Promise<LeaseLostError>((r) => (resolveLost = r));
  let stopped = false;
  let renewTimer: NodeJS.Timeout | undefined;
  let deadlineTimer: NodeJS.Timeout | undefined;
  let lastError = "";
  /** The send of the last answered renewal. */
  let from = o.sentAt;
  let inFlight: { abort: AbortController; done: Promise<void> } | undefined;
  const giveUpAt = () => from + ttlSeconds * 1000 - lossMarginMs(ttlSeconds);
  const loseWith = (detail: string) => {
    if (stopped || controller.signal.aborted) return;
    clearTimeout(renewTimer);
    clearTimeout(deadlineTimer);
    const e = new LeaseLostError(stack, detail);
    inFlight?.abort.abort(e);
    controller.abort(e);
    resolveLost(e);
  };
  // The lease is ours until ttl after the store received our last write; we stop believing it a margin earlier.
  const armDeadline = (sent: number) => {
    from = sent;
    clearTimeout(deadlineTimer);
    deadlineTimer = setTimeout(
      () =>
        loseWith(
          `it could not be renewed for ${Math.round((performance.now() - sent) / 1000)}s ` +
            `(${lastError || "no answer"}); ` +
            `another run may take it over ${ttlSeconds}s after the last renewal`,
        ),
      Math.max(0, giveUpAt() - performance.now()),
    );
    deadlineTimer.unref();
  };
  const schedule = (ms: number) => {
    if (stopped || controller.signal.aborted) return;
    renewTimer = setTimeout(() => void renew(), ms);
    renewTimer.unref();
  };
  const renew = async () => {
    if (stopped || controller.signal.aborted) return;
    const t = performance.now();
    const abandonAt = Math.min(giveUpAt(), t + STORE_CALL_MS);
    const abort = new AbortController();
    const timer = setTimeout(
      () => abort.abort(new Error(`no answer within ${Math.round((abandonAt - t) / 100) / 10}s`)),
      Math.max(0, abandonAt - t),
    );
    timer.unref();
    let settled!: () => void;
    inFlight = { abort, done: new Promise<void>((r) => (settled = r)) };
    try {
      const r = await o.renew({ signal: abort.signal, abandonAt, expiresAt: from + ttlSeconds * 1000 });
      if (stopped || controller.signal.aborted) return;
      if (r.kind === "lost") return loseWith(r.detail);
      if (r.kind === "again") return schedule(0);
      // An answer after the attempt was abandoned may be of a write readers count as late: no re-arm.
      if (performance.now() <= abandonAt) {
        lastError = "";
        armDeadline(t);
      }
    } catch (e) {
      if (stopped || controller.signal.aborted) return;
      // A store's BackendError tells a run that is starting what to do; mid-run only what is wrong counts.
      lastError = ((e as { detail?: string }).detail ?? (e as Error).message).split("\n")[0];
      o.onRenewError?.(e as Error);
    } finally {
      clearTimeout(timer);
      inFlight = undefined;
      settled();
    }
    schedule(Math.max(0, t + renewIntervalMs(ttlSeconds) - performance.now()));
  };
  armDeadline(o.sentAt);
  schedule(renewIntervalMs(ttlSeconds));
  return {
    signal: controller.signal,
    lost,
    release: async () => {
      if (stopped) return;
      stopped = true;
      clearTimeout(renewTimer);
      clearTimeout(deadlineTimer);
      const pending = inFlight;
      if (pending) {
        pending.abort.abort(new Error("the lease is being released"));
        await pending.done;
      }
      await o.giveUp(AbortSignal.timeout(STORE_CALL_MS));
    },
  };
}
