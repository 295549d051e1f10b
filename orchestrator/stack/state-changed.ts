// What a run that the state guard (infra/guard.ts) refused ends with: exit 3, nothing to roll back.

/** A guarded `up` found the state changed by another run since this run read it (infra/guard.ts). */
export class StateChangedByAnotherRunError extends Error {
  constructor(stack: string) {
    super(
      `stack "${stack}" was changed by another run since this run read it (its state guard refused this ` +
        "run's update before any resource was touched); nothing was changed. Another molt run holds or held the " +
        "stack: run again once it finished.",
    );
    this.name = "StateChangedByAnotherRunError";
  }
}

/** The engine refused an `up` because another update of the stack is under way (its own lock). */
export class AnotherUpdateInProgressError extends Error {
  constructor(stack: string, detail: string) {
    super(
      `another engine run is updating stack "${stack}" (${detail}); this run changed nothing and stops. ` +
        "Another molt run (or a `pulumi` command by hand) holds the stack: run again once it finished.",
    );
    this.name = "AnotherUpdateInProgressError";
  }
}

/** The engine's words for "another update holds the stack": a DIY backend's lock file, Pulumi Cloud's 409. */
export function isUpdateInProgress(message: string): boolean {
  return /the stack is currently locked by|Another update is currently in progress|\[409\] Conflict/i.test(message);
}
