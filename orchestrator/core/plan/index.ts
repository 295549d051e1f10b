// The planner: pure functions from one observed world to the next operation.
export { decide, passedStep } from "./decide";
export { scopeOf, type Scope } from "./scope";
export {
  agreedLeader,
  canSafelyRemoveMember,
  isHealthyVoter,
  isNodeName,
  isUnreachable,
  isOutdated,
  kubeProblem,
  memberOfNode,
  newEntry,
  nextNodeName,
  quorum,
  selectNodeForRetirement,
  STALE_LEASE_SECONDS,
} from "./rules";
export {
  compareMinors,
  compareVersions,
  etcdVersionProblem,
  fullVersionOf,
  kubernetesVersionProblem,
  minorName,
  minorOf,
  versionOf,
  type Version,
} from "./versions";
export { isTransientEtcdRefusal, waitDeadlineSeconds } from "./waits";
export { plannedReplacements, replacementsNow, type PlannedReplacement } from "./replacements";
export { chainOf, chainPath, stepIntent, type Chain, type ChainResult, type ChainStep } from "./chain";
export { endpointHealth, isTargetHealthy, targetRelease } from "./endpoint";
