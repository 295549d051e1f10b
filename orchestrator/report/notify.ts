// --notify URL: the run's start, every failure or pause, and its summary, POSTed as JSON to
// a webhook, in order. Each post has a timeout and is retried with backoff; a webhook that
// fails is reported (onProblem) and never fails the rollout.
import { pause } from "../../lib/poll";
import type { RolloutEvent } from "../events";

export interface NotifyOptions {
  /** Per attempt (ms). */
  timeoutMs?: number;
  /** Attempts per event, the first included. */
  attempts?: number;
  /** Backoff before the second attempt (ms); doubled each time. */
  backoffMs?: number;
  /** A post that failed for good (and why): reported, never thrown. */
  onProblem?: (message: string) => void;
}

/** The events a webhook hears: the start, failures and pauses, the summary. */
export function isNotable(e: RolloutEvent): boolean {
  switch (e.type) {
    case "start":
    case "summary":
    case "lock-lost":
      return true;
    case "hook":
    case "phase":
      return !e.ok;
    case "decision":
      return ["rollback", "pause", "refuse"].includes(e.operation.kind);
    default:
      return false;
  }
}

export class WebhookNotifier {
  private queue: Promise<void> = Promise.resolve();
  private stack?: string;
  readonly sent: number[] = [];

  constructor(
    readonly url: string,
    private readonly o: NotifyOptions = {},
  ) {}

  /** Queues the event if it is notable; returns at once. */
  readonly handle = (e: RolloutEvent): void => {
    if (e.type === "start") this.stack = e.stack;
    if (!isNotable(e)) return;
    const body = JSON.stringify(
      { source: "molt", stack: this.stack ?? (e.type === "summary" ? e.stack : undefined), time: new Date(), event: e },
      (_k, v) => (typeof v === "bigint" ? v.toString() : v),
    );
    this.queue = this.queue.then(() => this.post(body, e.type));
  };

  /** Waits for the queued posts (each bounded by its attempts and timeouts). */
  async flush(): Promise<void> {
    await this.queue;
  }

  private async post(body: string, what: string): Promise<void> {
    const attempts = this.o.attempts ?? 3;
    let backoff = this.o.backoffMs ?? 1000;
    let last = "";
    for (let i = 1; i <= attempts; i++) {
      try {
        const r = await fetch(this.url, {
          method: "POST",
          headers: { "content-type": "application/json", "user-agent": "molt" },
          body,
          signal: AbortSignal.timeout(this.o.timeoutMs ?? 5000),
        });
        await r.arrayBuffer().catch(() => undefined);
        if (r.ok) return void this.sent.push(r.status);
        last = `HTTP ${r.status}`;
        // A client error other than 408/429 will not pass by retrying.
        if (r.status < 500 && r.status !== 408 && r.status !== 429) break;
      } catch (e) {
        const err = e as Error & { cause?: Error };
        last =
          err.name === "TimeoutError"
            ? `no answer within ${this.o.timeoutMs ?? 5000} ms`
            : (err.cause?.message ?? err.message);
      }
      if (i < attempts) {
        await pause(backoff);
        backoff *= 2;
      }
    }
    this.o.onProblem?.(
      `webhook ${redact(this.url)}: the ${what} event was not delivered (${last}); the rollout goes on`,
    );
  }
}

/** A webhook URL without its credentials or query (tokens often live there), for messages. */
export function redact(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return "(invalid URL)";
  }
}

/** A --notify value: an http(s) URL, else a reason. */
export function notifyUrlProblem(url: string): string | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return `--notify: ${JSON.stringify(url)} is not a URL; give the webhook as http(s)://host/path`;
  }
  if (u.protocol !== "http:" && u.protocol !== "https:")
    return `--notify: ${u.protocol} is not supported; give an http:// or https:// webhook URL`;
  return undefined;
}
