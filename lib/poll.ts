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
  /** How long a check still running at the deadline, or at a cancel, may take to return (default 30 s). */
  graceMs?: number;
}

/**
 * A check still running at its wait's deadline, or when the wait is cancelled, gets this long
 * to return before the wait gives up on it: longer than the calls checks make bound themselves
 * (an SSH connect's 20 s, its keepalive's 20 s), so a check given up on has hung.
 */
export const CHECK_GRACE_MS = 30_000;

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
    // Each check is bounded too: one that never returns (a call with no deadline of its own on
    // a connection that hangs) ends the wait at the deadline and its grace. A cancel lets the
    // check under way finish (what it sees may matter: a hand-off it completes), within the grace.
    const value = await bounded(Promise.resolve(check(miss)), until, o, cancelled, () => last);
    if (value !== undefined) return value;
    if (o.signal?.aborted) throw cancelled();
    if (Date.now() >= until) {
      throw new DeadlineError(
        `${o.what} did not happen within ${Math.round(o.deadlineMs / 100) / 10}s${last ? ` (${last})` : ""}`,
      );
    }
    await pause(Math.min(interval, Math.max(0, until - Date.now())), o.signal);
    // Cancelled during the pause: no new check (a drain's would evict more pods).
    if (o.signal?.aborted) throw cancelled();
    interval = Math.min(interval * 2, o.maxIntervalMs ?? 500);
  }
}

/**
 * `p`; or a DeadlineError once `until` (epoch ms) and the grace have passed; or, after a cancel,
 * `cancelled()` once the grace has passed (the check under way is let finish until then).
 */
function bounded<T>(
  p: Promise<T>,
  until: number,
  o: PollOptions,
  cancelled: () => Error,
  lastMiss: () => string,
): Promise<T> {
  const grace = o.graceMs ?? CHECK_GRACE_MS;
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const limit = new Promise<never>((_, reject) => {
    const late = () => {
      const miss = lastMiss();
      return new DeadlineError(
        `${o.what} did not happen within ${Math.round(o.deadlineMs / 100) / 10}s ` +
          `(its last check had not returned ${Math.round(grace / 100) / 10}s after that` +
          `${miss ? `; the one before: ${miss}` : ""})`,
      );
    };
    timer = setTimeout(() => reject(late()), Math.max(0, until + grace - Date.now()));
    onAbort = () => {
      clearTimeout(timer);
      timer = setTimeout(() => reject(cancelled()), Math.max(0, Math.min(until, Date.now()) + grace - Date.now()));
    };
    if (o.signal?.aborted) onAbort();
    else o.signal?.addEventListener("abort", onAbort, { once: true });
  });
  return Promise.race([p, limit]).finally(() => {
    clearTimeout(timer);
    if (onAbort) o.signal?.removeEventListener("abort", onAbort);
  });
}
