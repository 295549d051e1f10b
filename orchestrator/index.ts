// molt as a library: the typed entry points platform tooling embeds.
export {
  rollout,
  plannedReplacements,
  RefusedError,
  type RolloutOptions,
  type Summary,
  type PlannedReplacement,
} from "./rollout";
export { inspect, type Inspection, type Condition } from "./inspect";
export type { RolloutEvent, RolloutResultKind, NodeView, Phase } from "./events";
export type { Intent, Operation, Snapshot } from "./model";
export { decide } from "./plan";
export { InvalidConfigError, loadStackConfig } from "./config";
export { ConcurrentRolloutError } from "./lock";
export { CorruptStateError } from "./observe";
export { StackNotFoundError } from "./stack/driver";
export { EngineMissingError } from "./stack/engine";
