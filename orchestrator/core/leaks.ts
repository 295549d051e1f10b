// Machines a killed run left running: a cloud instance that carries molt's tags for this
// cluster but that the stack's state does not hold (the engine died between the cloud's
// create and recording its id). What to do with each is decided here; the cloud is asked
// and told through a MachineInventory (edges.ts).
import type { Member } from "./observations";

/** A control-plane machine the cloud lists under molt's tags for this cluster. */
export interface CloudMachine {
  id: string;
  /** Its molt.io/node tag: the node it was created for. */
  node?: string;
  /** Private address (what etcd's peer URLs name). */
  address?: string;
  /** The cloud's own state name (AWS: pending, running, stopping, stopped, ...). */
  state: string;
  launchedAt?: string;
}

export type LeakVerdict =
  { machine: CloudMachine; action: "terminate" } | { machine: CloudMachine; action: "keep"; reason: string };

/** States of a machine on its way out (AWS: shutting-down, terminated; Azure: Deleting). */
const GONE = new Set(["shutting-down", "terminated", "deleting"]);

/**
 * The listed machines the state does not hold, each with what to do: terminate it only when
 * asked to, and never one whose address etcd lists as a member (a killed surge that got as
 * far as the join: the planner's remove-stray-member takes the member out first, after which
 * the next converged run terminates the machine). `members` undefined: etcd was not seen.
 * `key`: the form in which listed and held ids compare (Azure's ARM ids: any case).
 * `ownNode`: whether a molt.io/node tag names a node of this stack. The cluster name alone is
 * no owner (two stacks may share it, "kubernetes" by default, in one account): a machine
 * another stack's node tag names is none of this stack's business and is left out; one with
 * no node tag is reported, never terminated.
 */
export function leakedMachines(
  listed: readonly CloudMachine[],
  heldIds: readonly string[],
  members: readonly Member[] | undefined,
  terminate: boolean,
  ownNode: (node: string) => boolean,
  key: (id: string) => string = (id) => id,
): LeakVerdict[] {
  const held = new Set(heldIds.map(key));
  const memberHosts = new Set((members ?? []).flatMap((m) => m.peerURLs.map(hostOf)));
  return listed
    .filter((m) => !held.has(key(m.id)) && !GONE.has(m.state.toLowerCase()))
    .filter((m) => m.node === undefined || ownNode(m.node))
    .map((machine): LeakVerdict => {
      if (machine.node === undefined)
        return {
          machine,
          action: "keep",
          reason: "not terminated: it has no molt.io/node tag naming a node of this stack",
        };
      if (!terminate)
        return { machine, action: "keep", reason: "not terminated: rerun with --terminate-leaked to terminate it" };
      if (held.size === 0)
        return {
          machine,
          action: "keep",
          reason: "not terminated: the state read back holds no machine at all, which a converged cluster cannot be",
        };
      if (members === undefined)
        return { machine, action: "keep", reason: "not terminated: etcd's members were not seen in this run" };
      if (machine.address === undefined)
        return {
          machine,
          action: "keep",
          reason: "not terminated: its address is unknown, so etcd's members cannot rule it out",
        };
      if (memberHosts.has(machine.address))
        return {
          machine,
          action: "keep",
          reason:
            `not terminated: ${machine.address} is an etcd member; molt removes the stray member first, a later ` +
            "converged run with --terminate-leaked terminates the machine",
        };
      return { machine, action: "terminate" };
    });
}

function hostOf(url: string): string {
  try {
    return new URL(url).hostname.replace(/^\[|\]$/g, "");
  } catch {
    return url;
  }
}

/**
 * Some of the machines asked for were not terminated: which were (`terminated`), which not and
 * why (`failed`), so a report can say both. Every machine was tried, whatever the others did.
 */
export class TerminateMachinesError extends Error {
  constructor(
    where: string,
    readonly terminated: readonly string[],
    readonly failed: readonly { id: string; error: string }[],
  ) {
    super(
      `terminating ${terminated.length + failed.length} machine(s) on ${where}: ` +
        `${failed.length} NOT terminated (${failed.map((f) => `${f.id}: ${f.error}`).join("; ")}); ` +
        `terminated: ${terminated.length ? terminated.join(", ") : "none"}`,
    );
    this.name = "TerminateMachinesError";
  }
}

/** `one` for every id, all tried whatever the others did; TerminateMachinesError when any failed. */
export async function terminateEach(
  where: string,
  ids: readonly string[],
  one: (id: string) => Promise<void>,
): Promise<void> {
  const results = await Promise.allSettled(ids.map((id) => one(id)));
  const failed = results.flatMap((r, i) =>
    r.status === "rejected"
      ? [{ id: ids[i], error: (r.reason instanceof Error ? r.reason.message : String(r.reason)).split("\n")[0] }]
      : [],
  );
  if (failed.length)
    throw new TerminateMachinesError(
      where,
      ids.filter((_, i) => results[i].status === "fulfilled"),
      failed,
    );
}
