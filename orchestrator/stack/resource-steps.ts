// The engine's resource steps during an `up` (a machine created, a join script running, a
// member removed), as `resource` events for live progress (orchestrator/cli/progress.ts).
import type { EngineEvent } from "@pulumi/pulumi/automation";
import type { RolloutEvent } from "../events";

export function resourceStep(e: EngineEvent): Extract<RolloutEvent, { type: "resource" }> | undefined {
  const m = e.resourcePreEvent?.metadata ?? e.resOutputsEvent?.metadata ?? e.resOpFailedEvent?.metadata;
  // The stack and provider resources are not steps anyone waits on.
  if (!m || m.op === "same" || m.op === "read" || m.type === "pulumi:pulumi:Stack") return undefined;
  if (m.type.startsWith("pulumi:providers:")) return undefined;
  const status = e.resourcePreEvent ? "started" : e.resOutputsEvent ? "done" : "failed";
  return { type: "resource", op: m.op, resource: m.urn.split("::").pop() ?? m.urn, kind: m.type, status };
}
