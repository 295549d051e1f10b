// What promotion tells its caller: part of the rollout's event union (orchestrator/events.ts)
// and the events of `molt verify` and `molt promote` (CLI --json: one per line).

export type PromotionEvent =
  /** A rollout's pre-flight: the release checked against the records of molt:promotion.requireVerifiedOn. */
  | {
      type: "release-check";
      stack: string;
      release: string;
      digest: string;
      sources: { stack: string; where: string; verified: boolean; detail: string }[];
    }
  /** The record of this stack's release was written (or kept) in its backend. */
  | {
      type: "verification";
      stack: string;
      release: string;
      digest: string;
      where: string;
      state: "soaking" | "verified" | "kept" | "removed";
      detail: string;
    }
  /** One soak observation. */
  | {
      type: "soak";
      stack: string;
      release: string;
      observation: number;
      healthy: boolean;
      elapsedMs: number;
      soakMs: number;
      detail: string;
    };

export type VerifyEvent =
  | PromotionEvent
  | { type: "warning"; message: string }
  | {
      type: "verify-summary";
      stack: string;
      release: string;
      result: "verified" | "already-verified" | "soak-failed" | "cancelled";
      reason: string;
      wallMs: number;
    };

export type PromoteEvent =
  | { type: "promote-check"; check: string; ok: true; detail: string }
  /** A record accepted without a trusted key to check it (molt:promotion.requireVerifiedOn names none). */
  | { type: "warning"; message: string }
  | { type: "promote-diff"; file: string; diff: string }
  | {
      type: "promoted";
      from: string;
      to: string;
      release: string;
      digest: string;
      file: string;
      written: boolean;
    };
