// molt as a library: the typed entry points platform tooling embeds.
export {
  rollout,
  plannedReplacements,
  RefusedError,
  type RolloutOptions,
  type Summary,
  type PlannedReplacement,
} from "./rollout";
export type { EdgeFactory, EdgeOptions } from "./edges/open";
export type { Edges, EtcdEdge, KubeEdge, NodeAccess } from "./core/edges";
export type { StackEdge, StackState, NodeListChange } from "./core/edges";
export { inspect, type Inspection, type Condition } from "./inspect";
export type { RolloutEvent, NodeView, Phase } from "./events";
export type { RolloutResultKind } from "./core/model";
export type { Intent, Operation, World, WaitKey } from "./core/model";
export { decide } from "./core/plan";
export { InvalidConfigError, loadStackConfig } from "./config";
export { ConcurrentRolloutError, LeaseLostError, acquireLock, type HeldLock, type LockHolder } from "./lease/bucket";
export { EngineLockedError } from "./stack/engine-lock";
export { openStore } from "./backend/store";
export { type ObjectStore, type StoredObject } from "./backend/object-store";
export { CorruptStateError } from "./stack/state";
export { StackNotFoundError, EngineCancelledError, stopEnginesNow } from "./stack/driver";
export { EngineMissingError } from "./stack/engine";
export { PluginMissingError } from "./stack/plugins";
export {
  adopt,
  AdoptionRefusedError,
  ExpectedHostKeys,
  HostKeysNotConfirmedError,
  InvalidAdoptionInputError,
  InvalidHostKeyInputError,
  parseHostList,
  parseKubeOneOutput,
  type AdoptOptions,
  type AdoptResult,
  type AdoptEvent,
  type AdoptionInput,
} from "./adopt";
export {
  verify,
  promote,
  releaseDigest,
  releaseStatus,
  readRecord,
  verificationProblem,
  loadSigner,
  parsePublicKey,
  generateSigningKeyPair,
  SigningKeyError,
  PromotionRefusedError,
  PromotionNotConfirmedError,
  UnreadableRecordError,
  type Release,
  type VerificationRecord,
  type RecordSigner,
  type VerifyOptions,
  type VerifySummary,
  type PromoteOptions,
  type PromoteResult,
  type ReleaseStatus,
  type PromotionEvent,
  type VerifyEvent,
  type PromoteEvent,
} from "./promotion";
// Operator controls: hooks as callbacks, the maintenance window, and the event stream's
// reporters (Prometheus text for a textfile collector, a JSON webhook).
export type { HookCallback, HookCallbacks, HookContext } from "./controls/hooks";
export type { HookName, RunControls } from "./core/model";
export { OutsideWindowError, windowState } from "./controls/window";
export { type MaintenanceWindow } from "./core/model";
export { metricsText, writeMetricsFile } from "./report/metrics";
export { WebhookNotifier, isNotable, type NotifyOptions } from "./report/notify";
