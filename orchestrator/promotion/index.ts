// Staging across environments: releases, verification records, soaks and promotion.
export { releaseDigest, type Release, type PromotionSettings, type VerificationSource } from "./release";
export { readRecord, recordKey, UnreadableRecordError, type VerificationRecord } from "./record";
export { verificationProblem, soakProblem, releaseIntentProblems, promotionTargetProblem } from "./rules";
export { releasePreflight, releaseRecorder } from "./hooks";
export { verify, type VerifyOptions, type VerifySummary } from "./verify";
export { promote, type PromoteOptions, type PromoteResult } from "./promote";
export { releaseStatus, type ReleaseStatus } from "./status";
export { PromotionRefusedError, PromotionNotConfirmedError } from "./errors";
export type { PromotionEvent, VerifyEvent, PromoteEvent } from "./events";
