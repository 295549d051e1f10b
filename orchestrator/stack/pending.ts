// Operations a killed engine left "pending" in the state (it was creating or deleting a
// resource when it died). The engine keeps them, warns on every later update, and asks for
// an interactive decision molt cannot give in CI. molt resolves them itself, the same way
// every time, and reports each one:
//  - a pending create of a resource the state holds now was re-done by a later update:
//    the record is obsolete;
//  - a pending create of a resource the state does not hold is part of a node that never
//    reached the node list (a surge was killed): the planner makes the next node under the
//    same name, and a lab machine of that name is started over, so nothing stays behind on
//    the lab. On a cloud a VM the killed engine created may exist untracked: the event
//    names the resource so it can be checked (molt cannot look for it without its id);
//  - a pending delete: the resource is still in the state (deleted again by the next prune
//    of its node, deletes are idempotent) or already gone; the record is obsolete.
import type { ClearedOperation } from "../core/edges";
import { ownerOf, urnName, type StateResource } from "./targets";

export interface PendingOperation {
  resource: { urn: string; type: string; id?: string };
  type: string;
}

export function explainPending(
  pending: readonly PendingOperation[],
  resources: readonly StateResource[],
  listed: readonly string[],
): ClearedOperation[] {
  const inState = new Set(resources.map((r) => r.urn));
  return pending.map((p) => {
    const urn = p.resource.urn;
    const name = urnName(urn);
    const node = ownerOf(name, listed);
    let reason: string;
    if (p.type === "creating") {
      if (inState.has(urn)) reason = "a later update created it again; the interrupted create is obsolete";
      else if (node)
        reason =
          `an interrupted create of a resource of listed node ${node}; the next update of that node makes it ` +
          `again`;
      else
        reason =
          "part of a node that never reached the node list (an interrupted surge); the next surge makes a node of " +
          "the same name again" +
          (p.resource.type.includes(":lab") || p.resource.type.startsWith("pulumi-nodejs:dynamic")
            ? ""
            : ` — check the cloud for an untracked ${p.resource.type} named ${name}`);
    } else if (p.type === "deleting") {
      reason = inState.has(urn)
        ? "an interrupted delete; the resource stays in the state and is deleted again with its node (deletes are " +
          "idempotent)"
        : "an interrupted delete of a resource already gone from the state";
    } else {
      reason = `an interrupted ${p.type}; molt never updates resources in place, the record is obsolete`;
    }
    return { urn, operation: p.type, reason };
  });
}
