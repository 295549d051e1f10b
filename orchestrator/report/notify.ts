// --notify URL: the run's start, every failure or pause, and its summary, POSTed as JSON to
// a webhook, in order. Each post has a timeout and is retried with backoff; a webhook that
// fails is reported (onProblem) and never fails the rollout. The URL's user info is sent as
// HTTP Basic authorization, never in the URL fetched; messages show the URL without user
// info or query. What is posted is redacted (report/redact.ts), and a hook's output is left
// out unless asked (includeHookOutput).
import { pause } from "../../lib/poll";
import type { RolloutEvent } from "../events";
import { displayUrl, redactDeep, redactText } from "./redact";

export interface NotifyOptions {
  /** Per attempt (ms). */
  timeoutMs?: number;
  /** Attempts per event, the first included. */
  attempts?: number;
  /** Backoff before the second attempt (ms); doubled each time. */
  backoffMs?: number;
  /** A post that failed for good (and why): reported, never thrown. */
  onProblem?: (message: string) => void;
  /**
   * Post a failed hook's output (redacted) too (molt:notify.includeHookOutput); by default
   * a `hook` event reaches the webhook without its output.
   */
  includeHookOutput?: boolean;
}

/** The events a webhook hears: the start, failures and pauses, the summary. */
export function isNotable(e: RolloutEvent): boolean {
  switch (e.type) {
    case "start":
    case "summary":
    case "lock-lost":
      return true;
    case "hook":
      return !e.ok;
    case "phase":
      // A failed hook's phase: its `hook` event says it.
      return !e.ok && e.phase !== "hook";
    case "decision":
      return ["rollback", "pause", "refuse"].includes(e.operation.kind);
    case "adopted-destroyed":
    case "backups-pruned":
    case "engine":
    case "engine-leftovers":
    case "engine-lock-cleared":
    case "hook-output":
    case "leaked-machines":
    case "left-for-owner":
    case "lock":
    case "lock-recovered":
    case "lock-release-failed":
    case "lock-renew-failed":
    case "observed":
    case "pending-cleared":
    case "release-check":
    case "resource":
    case "snapshot":
    case "soak":
    case "verification":
    case "warning":
      return false;
  }
}

export class WebhookNotifier {
  private queue: Promise<void> = Promise.resolve();
  private stack?: string;
  readonly sent: number[] = [];
  /** The URL fetched: without its user info. */
  private readonly target: string;
  private readonly authorization?: string;
  /** Texts of the URL that no message may repeat (its password, query, the URL itself). */
  private readonly hidden: string[];

  constructor(
    readonly url: string,
    private readonly o: NotifyOptions = {},
  ) {
    const problem = notifyUrlProblem(url);
    if (problem) throw new TypeError(problem);
    const u = new URL(url);
    if (u.username || u.password) {
      const user = decoded(u.username);
      const password = decoded(u.password);
      this.authorization = `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`;
      u.username = "";
      u.password = "";
    }
    this.target = u.toString();
    const password = new URL(url).password;
    this.hidden = [url, this.target, u.search.slice(1), u.hash.slice(1), password, decoded(password)]
      .filter((x) => x.length > 0)
      .sort((a, b) => b.length - a.length);
  }

  /** Queues the event if it is notable; returns at once. */
  readonly handle = (e: RolloutEvent): void => {
    if (e.type === "start") this.stack = e.stack;
    if (!isNotable(e)) return;
    const event = redactDeep(
      e.type === "hook" && !this.o.includeHookOutput ? (({ output: _, ...rest }) => rest)(e) : e,
    );
    const body = JSON.stringify(
      { source: "molt", stack: this.stack ?? (e.type === "summary" ? e.stack : undefined), time: new Date(), event },
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
        const r = await fetch(this.target, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            "user-agent": "molt",
            ...(this.authorization ? { authorization: this.authorization } : {}),
          },
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
      `webhook ${displayUrl(this.url)}: the ${what} event was not delivered (${this.scrub(last)}); ` +
        "the rollout goes on",
    );
  }

  /** A message about the webhook without its URL's secrets (an error may quote the URL). */
  private scrub(s: string): string {
    let out = s;
    for (const h of this.hidden) out = out.split(h).join(h === this.url || h === this.target ? displayUrl(h) : "***");
    return redactText(out);
  }
}

/** A URL's user name or password as typed (a malformed %-escape is kept as it is). */
function decoded(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** A webhook URL without its credentials or query (tokens often live there), for messages. */
export const redact = displayUrl;

/** A --notify value: an http(s) URL, else a reason. */
export function notifyUrlProblem(url: string): string | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    // Shown without what may be secret: user info and query.
    const shown = redactText(url.replace(/[?#].*$/s, "").replace(/^([A-Za-z][A-Za-z0-9+.-]*:\/\/)?[^/@]*@/, "$1"));
    return `--notify: ${JSON.stringify(shown)} is not a URL; give the webhook as http(s)://host/path`;
  }
  if (u.protocol !== "http:" && u.protocol !== "https:")
    return `--notify: ${u.protocol} is not supported; give an http:// or https:// webhook URL`;
  return undefined;
}
