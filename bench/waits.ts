// Where a run's waiting time goes, by what it waited for: each `wait` phase is the wait the
// decision before it chose (rollout.ts: decide, then the wait is timed), counted under its
// key's kind (`lb:cp-4` -> `lb`, `addons`); a pause after a refused call that molt retries
// counts as `retry`.
import type { RolloutEvent } from "../orchestrator/events";

type TimedEvent = RolloutEvent & { at: number };

export interface WaitShare {
  kind: string;
  ms: number;
  /** How many waits (one per decision) of this kind. */
  count: number;
}

/** The wait phases of a run by their key's kind, longest first. */
export function waitsByKind(events: readonly TimedEvent[]): WaitShare[] {
  const byKind = new Map<string, WaitShare>();
  let key: string | undefined;
  for (const e of events) {
    if (e.type === "decision") key = e.operation.kind === "wait" ? e.operation.key : undefined;
    else if (e.type === "phase" && e.phase === "wait") {
      const kind = key === undefined ? "retry" : key.split(":")[0];
      const w = byKind.get(kind) ?? { kind, ms: 0, count: 0 };
      w.ms += e.ms;
      w.count += 1;
      byKind.set(kind, w);
      key = undefined;
    }
  }
  return [...byKind.values()].sort((a, b) => b.ms - a.ms);
}
