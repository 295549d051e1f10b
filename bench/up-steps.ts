// Where a targeted `up`'s time goes, from molt's own events: from the `up`'s start to the
// engine's first resource step (engine start, state, the program's registrations, the
// dynamic provider's start), the steps themselves (a prune: the machine destroyed, the LB
// detached), and from the last step's end to the `up`'s return (checkpoint, shutdown).
import type { RolloutEvent } from "../orchestrator/events";

type TimedEvent = RolloutEvent & { at: number };

export interface UpSteps {
  node: string;
  upMs: number;
  toFirstStepMs: number;
  stepsMs: number;
  afterLastStepMs: number;
}

/** One entry per successful provision phase of `op` that ran at least one resource step. */
export function upSteps(events: readonly TimedEvent[], op: string): UpSteps[] {
  const out: UpSteps[] = [];
  for (const p of events) {
    if (p.type !== "phase" || p.phase !== "provision" || p.operation !== op || !p.ok) continue;
    const start = p.at - p.ms;
    const steps = events.filter((e) => e.type === "resource" && e.at >= start && e.at <= p.at);
    const first = steps.find((e) => e.type === "resource" && e.status === "started");
    const last = steps.filter((e) => e.type === "resource" && e.status !== "started").at(-1);
    if (!first || !last) continue;
    out.push({
      node: p.node ?? "",
      upMs: p.ms,
      toFirstStepMs: first.at - start,
      stepsMs: last.at - first.at,
      afterLastStepMs: p.at - last.at,
    });
  }
  return out;
}
