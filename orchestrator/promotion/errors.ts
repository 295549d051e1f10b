// The errors promotion adds: both mean "nothing was changed".

/** A rollout, verify or promote refused by the promotion rules (exit 2). */
export class PromotionRefusedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PromotionRefusedError";
  }
}

/** `molt promote` without --yes where it cannot ask, or answered no (exit 6). */
export class PromotionNotConfirmedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PromotionNotConfirmedError";
  }
}
