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
}

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
  for (;;) {
    const value = await check(miss);
    if (value !== undefined) return value;
    if (o.signal?.aborted) {
      const e = new Error(`cancelled while waiting for ${o.what}`);
      e.name = "AbortError";
      throw e;
    }
    if (Date.now() >= until) {
      throw new DeadlineError(
        `${o.what} did not happen within ${Math.round(o.deadlineMs / 100) / 10}s${last ? ` (${last})` : ""}`,
      );
    }
    await pause(Math.min(interval, Math.max(0, until - Date.now())), o.signal);
    interval = Math.min(interval * 2, o.maxIntervalMs ?? 500);
  }
}
