// Live progress for human output on a terminal: one line at the bottom, redrawn in place
// with log-update, says what is happening now (the operation, its elapsed time, the
// engine's current resource step or a hook's last line); every other line scrolls above
// it as usual. Without a terminal (CI logs) none of this runs: plain lines only.
import type { RolloutEvent } from "../events";

type LogUpdate = ((...text: string[]) => void) & { clear(): void; done(): void };

const FRAMES = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

export class LiveProgress {
  private current?: { key: string; what: string; since: number; step?: string };
  private frame = 0;
  private suspended = false;
  private readonly timer: NodeJS.Timeout;

  private constructor(
    private readonly update: LogUpdate,
    private readonly out: NodeJS.WriteStream,
    private readonly now: () => number,
  ) {
    // A redraw tick (the spinner and the elapsed time), not a wait.
    this.timer = setInterval(() => this.draw(), 250);
    this.timer.unref();
  }

  static async open(out: NodeJS.WriteStream = process.stdout, now: () => number = Date.now): Promise<LiveProgress> {
    // log-update is an ES module; molt is CommonJS.
    const { createLogUpdate } = await import("log-update");
    return new LiveProgress(createLogUpdate(out, { showCursor: true }) as LogUpdate, out, now);
  }

  /** Writes lines above the live line. */
  readonly write = (s: string): void => {
    this.update.clear();
    this.out.write(s);
    this.draw();
  };

  /** Writes lines to stderr (warnings), the live line cleared meanwhile (one terminal shows both). */
  readonly writeErr = (s: string): void => {
    this.update.clear();
    process.stderr.write(s);
    this.draw();
  };

  readonly onEvent = (e: RolloutEvent): void => {
    switch (e.type) {
      case "decision": {
        const op = e.operation;
        const key = op.kind === "wait" ? `wait ${op.key}` : `${op.kind} ${"node" in op ? op.node : ""}`;
        if (this.current?.key === key) return;
        const what =
          op.kind === "wait"
            ? `waiting: ${op.reason}`
            : `${op.kind}${"node" in op && op.node ? ` ${op.node}` : ""}` +
              `${op.kind === "prune-and-surge" ? " ->" : ""}` +
              `${"entry" in op ? ` ${op.entry.name}` : ""}`;
        this.current = { key, what, since: this.now() };
        break;
      }
      case "resource":
        if (this.current) this.current.step = `${e.op} ${e.resource} ${e.status}`;
        break;
      case "hook-output":
        if (this.current) this.current.step = `${e.hook}: ${e.line.slice(0, 100)}`;
        break;
      case "summary":
        this.stop();
        return;
      // The live line shows the operation and its step; these are printed as lines of their own.
      case "adopted-destroyed":
      case "backups-pruned":
      case "engine":
      case "engine-leftovers":
      case "engine-lock-cleared":
      case "hook":
      case "leaked-machines":
      case "left-for-owner":
      case "lock":
      case "lock-lost":
      case "lock-recovered":
      case "lock-release-failed":
      case "lock-renew-failed":
      case "observed":
      case "pending-cleared":
      case "phase":
      case "release-check":
      case "snapshot":
      case "soak":
      case "start":
      case "verification":
      case "warning":
        break;
    }
    this.draw();
  };

  /** While a prompt asks the user: no live line. */
  suspend(): void {
    this.suspended = true;
    this.update.clear();
  }

  resume(): void {
    this.suspended = false;
    this.draw();
  }

  stop(): void {
    clearInterval(this.timer);
    this.current = undefined;
    this.update.clear();
    this.update.done();
  }

  private draw(): void {
    const c = this.current;
    if (!c || this.suspended) return;
    const width = this.out.columns ?? 120;
    const elapsed = Math.round((this.now() - c.since) / 1000);
    const line = `${FRAMES[this.frame++ % FRAMES.length]} ${c.what} · ${elapsed}s${c.step ? ` · ${c.step}` : ""}`;
    this.update(line.length > width - 1 ? line.slice(0, width - 2) + "…" : line);
  }
}
