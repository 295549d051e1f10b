// The error of an engine command stopped by the run's cancel (stack/engine-process.ts): the
// loop ends at the boundary after it. A module of its own, so the act modules can name it
// without loading the engine's runner.

/** An engine command stopped by a cancel; `hard` when it was terminated, not cancelled. */
export class EngineCancelledError extends Error {
  constructor(
    readonly command: string,
    readonly hard: boolean,
    readonly started: boolean,
    detail: string,
  ) {
    const more = detail ? ` (${detail})` : "";
    super(
      !started
        ? `cancelled before \`pulumi ${command}\` started; nothing was changed by it`
        : hard
          ? `\`pulumi ${command}\` was terminated by a second signal: a step it was running may be half done ` +
            `and left pending in the state; the next \`molt rollout\` clears it and converges${more}`
          : `\`pulumi ${command}\` was cancelled: the steps it was running finished and no new step started${more}`,
    );
    this.name = "EngineCancelledError";
  }
}
