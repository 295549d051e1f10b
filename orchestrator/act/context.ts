// What every act receives: the edges, the world the decision was made on, and the run's
// reporting. Acts carry out a decision; they decide nothing the operation does not say.
import type { Edges } from "../core/edges";
import type { RolloutEvent } from "../events";
import type { Intent, Operation, World } from "../core/model";
import type { ActOutcome } from "../core/memory";
import type { Timed } from "../loop/timing";
import type { HookCallbacks } from "../controls/hooks";

export interface ActContext {
  edges: Edges;
  world: World;
  intent: Intent;
  signal?: AbortSignal;
  /** Interval between checks while an act waits on a condition of its own (ms). */
  pollMs: number;
  timed: Timed;
  report(e: RolloutEvent): void;
  /** The library's hook callbacks (RolloutOptions.hooks), run after molt:hooks commands. */
  hookCallbacks?: HookCallbacks;
  /** molt:notify.includeHookOutput: a failed hook's last lines go into the reasons (and webhooks) too. */
  hookOutputInReports?: boolean;
}

export type Act<K extends Operation["kind"]> = (
  op: Extract<Operation, { kind: K }>,
  ctx: ActContext,
) => Promise<ActOutcome>;

/** The first lines of an engine or script error worth showing. */
export function firstLines(s: string, n = 6): string {
  // A bootstrap script's own verdict ("HH:MM:SS [node] error: ...") says most; then the engine's errors.
  const own = [
    ...new Set(
      s
        .split("\n")
        .map((l) => /\[[^\]]+\] error: .*/.exec(l)?.[0])
        .filter((l): l is string => !!l),
    ),
  ];
  const lines = s.split("\n").filter((l) => /error|fail|timed out/i.test(l) && !/bash\.bashrc/.test(l));
  return [...own, ...(own.length ? [] : lines.length ? lines : s.split("\n"))].slice(0, n).join(" | ");
}
