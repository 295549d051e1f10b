// The orchestrator's side of a node's teardown (infra/remote/teardown.ts): the engine
// environment for an `up` that destroys a node the planner saw dead, and the teardown's
// reports, read back from the engine's diagnostics as `warning` events.
import type { EngineEvent } from "@pulumi/pulumi/automation";
import { UNREACHABLE_NODES_ENV, encodeUnreachableNodes, parseTeardownWarning } from "../infra/remote/teardown";
import type { NodeEndpoint, Operation } from "./core/model";

/**
 * Environment for the `up` of a prune (alone or with the next surge) or rollback the
 * planner marked `unreachable` (no etcd member, SSH not answering); undefined for every
 * other operation.
 */
export function teardownEnv(op: Operation, endpoints: NodeEndpoint[]): Record<string, string> | undefined {
  if ((op.kind !== "prune" && op.kind !== "rollback" && op.kind !== "prune-and-surge") || !op.unreachable)
    return undefined;
  const ep = endpoints.find((e) => e.name === op.node);
  if (!ep) return undefined;
  return {
    [UNREACHABLE_NODES_ENV]: encodeUnreachableNodes([{ name: op.node, host: ep.sshHost, hostKey: ep.hostPublicKey }]),
  };
}

/** A teardown's report in an engine event (its stderr line, as a diagnostic), if it is one. */
export function teardownWarning(e: EngineEvent): { node: string; message: string } | undefined {
  const d = e.diagnosticEvent;
  return d ? parseTeardownWarning(d.message) : undefined;
}
