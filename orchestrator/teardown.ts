// The orchestrator's side of a node's teardown (infra/remote/teardown.ts): the engine
// environment for an `up` that destroys a node without its teardown, and the teardown's
// reports, read back from the engine's diagnostics as `warning` events.
import type { EngineEvent } from "@pulumi/pulumi/automation";
import { TEARDOWN_SKIPS_ENV, encodeTeardownSkips, parseTeardownWarning } from "../infra/remote/teardown";
import type { NodeEndpoint, Operation } from "./core/model";

/**
 * Environment for the `up` of a prune (alone or with the next surge): the retired machine is
 * destroyed without a teardown (`kubeadm reset`), whatever it answers. For a rollback the
 * planner marked `unreachable` (no etcd member, SSH not answering): its teardown is skipped
 * if it still does not answer. Undefined for every other operation: teardowns run.
 */
export function teardownEnv(op: Operation, endpoints: NodeEndpoint[]): Record<string, string> | undefined {
  if (op.kind !== "prune" && op.kind !== "prune-and-surge" && op.kind !== "rollback") return undefined;
  const when = op.kind !== "rollback" ? "destroyed" : op.unreachable ? "unreachable" : undefined;
  if (!when) return undefined;
  const ep = endpoints.find((e) => e.name === op.node);
  if (!ep) return undefined;
  return {
    [TEARDOWN_SKIPS_ENV]: encodeTeardownSkips([{ name: op.node, host: ep.sshHost, hostKey: ep.hostPublicKey, when }]),
  };
}

/** A teardown's report in an engine event (its stderr line, as a diagnostic), if it is one. */
export function teardownWarning(e: EngineEvent): { node: string; message: string } | undefined {
  const d = e.diagnosticEvent;
  return d ? parseTeardownWarning(d.message) : undefined;
}
