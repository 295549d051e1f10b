// The one way molt waits: a condition checked with a growing interval, bounded by a
// deadline, cancellable. Nothing in molt sleeps for a fixed time.

export class DeadlineError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "DeadlineError";
  }
}

/** Resolves after `ms`, or at once when `signal` aborts (the interval between two checks). */
export function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const onAbort = () => (clearTimeout(timer), resolve());
    const timer = setTimeout(() => (signal?.removeEventListener("abort", onAbort), resolve()), ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

export interface PollOptions {
  /** What is awaited, for the error at the deadline ("etcd member of cp-3 to start"). */
  what: string;
  deadlineMs: number;
  /** First interval; doubled after each miss up to `maxIntervalMs`. */
  intervalMs?: number;
  maxIntervalMs?: number;
  signal?: AbortSignal;
  /** How long a check still running at the deadline may take to return (default 10 s). */
  graceMs?: number;
}

/** A check still running at its wait's deadline gets this long before the wait gives up on it. */
export const CHECK_GRACE_MS = 10_000;

/**
 * Calls `check` until it returns a value other than undefined, and returns that value.
 * Throws DeadlineError (with the last miss's reason, when `check` gave one through
 * `miss`) once `deadlineMs` has passed, or an AbortError-named error when cancelled.
 */
export async function pollUntil<T>(
  check: (miss: (reason: string) => undefined) => Promise<T | undefined> | T | undefined,
  o: PollOptions,
): Promise<T> {
  const until = Date.now() + o.deadlineMs;
  let interval = o.intervalMs ?? 20;
  let last = "";
  const miss = (reason: string): undefined => void (last = reason);
  const cancelled = () => {
    const e = new Error(`cancelled while waiting for ${o.what}`);
    e.name = "AbortError";
    return e;
  };
  for (;;) {
    // Each check is bounded too: one that never returns (a call with no deadline of its own
    // on a connection that hangs) ends the wait at the deadline and its grace, or at a cancel.
    const value = await bounded(Promise.resolve(check(miss)), until + (o.graceMs ?? CHECK_GRACE_MS), o, cancelled);
    if (value !== undefined) return value;
    if (o.signal?.aborted) throw cancelled();
    if (Date.now() >= until) {
      throw new DeadlineError(
        `${o.what} did not happen within ${Math.round(o.deadlineMs / 100) / 10}s${last ? ` (${last})` : ""}`,
      );
    }
    await pause(Math.min(interval, Math.max(0, until - Date.now())), o.signal);
    interval = Math.min(interval * 2, o.maxIntervalMs ?? 500);
  }
}

/** `p`, or a DeadlineError at `at` (epoch ms), or `cancelled()` when `o.signal` aborts. */
function bounded<T>(p: Promise<T>, at: number, o: PollOptions, cancelled: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new DeadlineError(
            `${o.what} did not happen within ${Math.round(o.deadlineMs / 100) / 10}s ` +
              `(its last check had not returned ${Math.round((o.graceMs ?? CHECK_GRACE_MS) / 100) / 10}s after that)`,
          ),
        ),
      Math.max(0, at - Date.now()),
    );
    onAbort = () => reject(cancelled());
    if (o.signal?.aborted) onAbort();
    else o.signal?.addEventListener("abort", onAbort, { once: true });
  });
  return Promise.race([p, limit]).finally(() => {
    clearTimeout(timer);
    if (onAbort) o.signal?.removeEventListener("abort", onAbort);
  });
}
