// The state guard's checks (infra/guard.ts), run by the dynamic provider during an `up`.
import type { GuardInputs } from "./guard";

export class StateChangedError extends Error {
  constructor(stored: string, expected: string) {
    super(
      `molt-state-guard: this stack's state was changed by another run since this run read it ` +
        `(the state holds ${stored || "no guard"}, this run read ${expected || "no guard"}); ` +
        "this update changed nothing. " +
        "Another molt run holds or held the stack: run again once it finished (the next run reads the stack afresh).",
    );
    this.name = "StateChangedError";
  }
}

export async function createGuard(i: GuardInputs): Promise<{ id: string; outs: GuardInputs }> {
  // A run that read a guard finds none: the stack was changed (or torn down) under it.
  if (i.expect !== "") throw new StateChangedError("", i.expect);
  return { id: "molt-state-guard", outs: i };
}

export async function updateGuard(olds: GuardInputs, news: GuardInputs): Promise<{ outs: GuardInputs }> {
  if (olds.token !== news.expect) throw new StateChangedError(olds.token, news.expect);
  return { outs: news };
}
