// What molt keeps beside a stack in its backend (leases, records, sidecar files), whatever the
// backend: the interface the file, S3 and Azure blob stores implement, and the deadline every
// call of theirs keeps.

export interface StoredObject {
  body: Buffer;
  /** Opaque version: pass it to putIfMatch/delete. */
  etag: string;
  /** When this version was written, by the store's clock. */
  modified: Date;
}

/** Per call: the call is abandoned (its request aborted) when `signal` aborts. */
export interface CallOptions {
  signal?: AbortSignal;
}

/** check's: `readOnly`, the caller only reads (another stack's records), so nothing may be created. */
export interface CheckOptions extends CallOptions {
  readOnly?: boolean;
}

/** How long one call of a store may take, its retries included, unless the caller gives it less. */
export const STORE_CALL_MS = 10_000;

/** A reading of the store's clock: `date` (ms, at the store's resolution), received at `at` (performance.now()). */
export interface StoreClock {
  date: number;
  at: number;
  /** How long the call that brought it took: the reading is at most this old when it arrives. */
  rttMs: number;
}

export interface ObjectStore {
  /** Where the objects live, for messages (never holds a credential). */
  readonly location: string;
  /** Fails with BackendError (exit 2) when the store cannot be used: no bucket, refused credentials, unreachable. */
  check(o?: CheckOptions): Promise<void>;
  get(key: string, o?: CallOptions): Promise<StoredObject | undefined>;
  /** The new version's etag, or undefined when the key already holds something. */
  putIfAbsent(key: string, body: Buffer, o?: CallOptions): Promise<string | undefined>;
  /** The new version's etag, or undefined when the key no longer holds version `etag`. */
  putIfMatch(key: string, body: Buffer, etag: string, o?: CallOptions): Promise<string | undefined>;
  /** True when version `etag` was deleted; false when the key holds another version or nothing. */
  delete(key: string, etag: string, o?: CallOptions): Promise<boolean>;
  /** Keys under a prefix ("" for all), in no particular order. */
  list(prefix: string, o?: CallOptions): Promise<string[]>;
  /** The store's clock now (the clock `modified` is read from), so expiry never compares two machines' clocks. */
  now(o?: CallOptions): Promise<Date>;
  /** Resolution of `modified` and `now()` in ms (S3's HTTP dates: whole seconds). */
  readonly clockResolutionMs: number;
  /** The store's clock as of its last answer that carried it (undefined before any). */
  lastClock(): StoreClock | undefined;
}

/**
 * The latest the store's clock can read at `at` (performance.now()), from its last reading: the
 * reading's resolution and the round trip that brought it are added, so the store's clock is
 * never later than this. Undefined before the store was read.
 */
export function storeTimeAtMost(store: ObjectStore, at = performance.now()): number | undefined {
  const c = store.lastClock();
  return c && c.date + store.clockResolutionMs + c.rttMs + (at - c.at);
}

/** A call abandoned because its caller's signal aborted (not the store's fault). */
export class CallAbandonedError extends Error {
  constructor(reason: unknown) {
    super(`abandoned: ${(reason as Error)?.message ?? String(reason)}`);
    this.name = "CallAbandonedError";
  }
}

/**
 * Runs one call of a store within its deadline: `call` gets the signal to pass to its
 * requests, and the call ends when the signal does even if a client library does not stop
 * (its request is then left to fail on its own). `timedOut` makes the error for a store that
 * did not answer in time; a call abandoned by the caller fails with CallAbandonedError.
 */
export function withinDeadline<T>(
  o: CallOptions | undefined,
  timedOut: (ms: number) => Error,
  call: (signal: AbortSignal) => Promise<T>,
  deadlineMs = STORE_CALL_MS,
): Promise<T> {
  const timer = AbortSignal.timeout(deadlineMs);
  const signal = o?.signal ? AbortSignal.any([o.signal, timer]) : timer;
  return new Promise<T>((resolve, reject) => {
    const stop = () => reject(o?.signal?.aborted ? new CallAbandonedError(o.signal.reason) : timedOut(deadlineMs));
    if (signal.aborted) return stop();
    signal.addEventListener("abort", stop, { once: true });
    call(signal)
      .then(resolve, (e: unknown) => (signal.aborted ? stop() : reject(e)))
      .finally(() => signal.removeEventListener("abort", stop));
  });
}
