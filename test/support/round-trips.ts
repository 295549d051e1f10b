// The round trips of a client that writes "throughout" a rollout (probe.ts through the nodes'
// etcd, vip-probe.ts through the VIP): one in flight at a time, retried with the same key and
// value (a put of the same value is idempotent) until it succeeds or its budget is spent.
// etcd drops the proposals in flight while its leadership moves ("raft proposal dropped" at
// once from the old leader; a follower's forwarded one never answers, "request timed out"
// after about 7 s): measured on loopback, a client of a real cluster sees this once per
// leader transfer at most, and retries.

/** How long a round trip (first attempt, retries, reconnects between them) may take: the chaos bound on a gap. */
export const RETRY_BUDGET_MS = 5000;

export interface Trip {
  key: string;
  value: string;
  started: number;
  firstError?: string;
}

export interface TripCounts {
  /** Round trips that did not succeed within RETRY_BUDGET_MS of their first attempt, retries included. */
  failed: number;
  errors: string[];
  /** Round trips that succeeded only on a retry: the first attempt's error and how long it took. */
  retried: string[];
}

export class RoundTrips {
  private pending: Trip | undefined;
  private i = 0;

  constructor(
    private readonly prefix: string,
    private readonly counts: TripCounts,
    private readonly intervalMs: number,
    private readonly maxErrors = 20,
  ) {}

  /** A round trip is being retried (the probe sees it through even when stopped). */
  get retrying(): boolean {
    return this.pending !== undefined;
  }

  /** The trip to make now: the one being retried, or a new key. */
  next(): Trip {
    return this.pending ?? { key: `${this.prefix}/${this.i++}`, value: String(Date.now()), started: Date.now() };
  }

  /** What is left of the trip's budget, at most `cap`: each attempt's limit. Throws when it is spent. */
  left(trip: Trip, cap: number): number {
    const ms = Math.min(cap, RETRY_BUDGET_MS - (Date.now() - trip.started));
    if (ms <= 0) throw new Error(`no success within ${RETRY_BUDGET_MS} ms`);
    return ms;
  }

  succeeded(trip: Trip): void {
    if (trip.firstError)
      this.counts.retried.push(`${trip.firstError}; succeeded after ${Date.now() - trip.started} ms`);
    this.pending = undefined;
  }

  /** An attempt failed: retried after the interval, or counted as failed when no other attempt fits. */
  attemptFailed(trip: Trip, error: string): void {
    this.pending = { ...trip, firstError: trip.firstError ?? error };
    if (Date.now() - trip.started < RETRY_BUDGET_MS - this.intervalMs) return;
    this.counts.failed++;
    if (this.counts.errors.length < this.maxErrors)
      this.counts.errors.push(`${error} (first: ${this.pending.firstError})`);
    this.pending = undefined;
  }
}

/** How many times the run moved etcd's leadership: the retried round trips it may explain. */
export function leaderTransfers(events: Record<string, unknown>[]): number {
  return events.filter((e) => e.type === "decision" && (e.operation as { kind: string }).kind === "move-leader").length;
}
