// Staging across environments: releases, verification records, soaks and promotion.
export { releaseDigest, type Release, type PromotionSettings, type VerificationSource } from "./release";
export { readRecord, recordKey, recordBytes, UnreadableRecordError, type VerificationRecord } from "./record";
export {
  verificationProblem,
  recordIntegrityProblem,
  recordConsistencyProblem,
  signatureProblem,
  soakProblem,
  releaseIntentProblems,
  promotionTargetProblem,
  type Trust,
} from "./rules";
export {
  loadSigner,
  parsePublicKey,
  generateSigningKeyPair,
  SigningKeyError,
  SIGNING_KEY_ENV,
  SIGNING_KEY_FILE_ENV,
  type RecordSigner,
} from "./signing";
export { canonicalJson } from "./canonical";
export { releasePreflight, releaseRecorder } from "./hooks";
export { verify, type VerifyOptions, type VerifySummary } from "./verify";
export { promote, type PromoteOptions, type PromoteResult } from "./promote";
export { releaseStatus, type ReleaseStatus } from "./status";
export { PromotionRefusedError, PromotionNotConfirmedError } from "./errors";
export type { PromotionEvent, VerifyEvent, PromoteEvent } from "./events";
