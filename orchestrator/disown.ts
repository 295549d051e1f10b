// `molt disown --stack S`: the stack gives up its cluster (core/ownership.ts). The cluster's
// ownership marker is removed only if it names S with S's backend, in a delete that requires
// it unchanged since it was read; the cluster is reached through S's own nodes, under S's
// lease (a rollout of S would claim it again). Nothing else on the cluster changes.
import { describeOwner, disownDecision, ownerReadOf, type OwnerMarker, type OwnerRead } from "./core/ownership";
import type { EdgeFactory } from "./edges/open";
import type { RolloutEvent } from "./events";
import { openRun } from "./run/context";

export interface DisownOptions {
  stack: string;
  workDir?: string;
  env?: Record<string, string>;
  /** The edges (tests pass fakes). */
  edges?: EdgeFactory;
  /** The lease's own reports (where it lives, a release that failed). */
  onEvent?: (e: RolloutEvent) => void;
}

export interface DisownResult {
  stack: string;
  /** "released": the marker was removed; "nothing": there was none. */
  result: "released" | "nothing";
  message: string;
  /** The marker removed. */
  owner?: OwnerMarker;
}

/** The marker could not be removed (another stack's, not molt's, changed, or unreadable): nothing changed (exit 2). */
export class DisownRefusedError extends Error {
  constructor(stack: string, problem: string) {
    super(`molt disown --stack ${stack}: ${problem}`);
    this.name = "DisownRefusedError";
  }
}

export async function disown(o: DisownOptions): Promise<DisownResult> {
  const refuse = (problem: string): never => {
    throw new DisownRefusedError(o.stack, problem);
  };
  const run = await openRun({ ...o, emit: (e) => o.onEvent?.(e) });
  const { self } = run;
  try {
    const lease = await run.hold("disown");
    const edges = await run.open({ clusterLease: false });
    const state = await edges.stack.state();
    if (state.nodes.length === 0)
      refuse(
        `stack ${o.stack} has no node, so molt cannot reach a cluster through it; nothing was changed. A stack ` +
          `whose adoption never got recorded can be taken over: \`--take-over ${o.stack}\` on the adoption or ` +
          "rollout of the stack that should own the cluster",
      );
    await lease.holdInCluster(edges);
    await edges.nodes.sync(state);
    const etcd = await edges.nodes.etcd();
    let read: OwnerRead;
    try {
      read = ownerReadOf(await etcd.readOwner());
    } catch (e) {
      read = { kind: "unobserved", error: (e as Error).message.split("\n")[0] };
    }
    const d = disownDecision(self, read);
    if (d.kind === "refuse") return refuse(d.problem);
    if (d.kind === "nothing") return { stack: o.stack, result: "nothing", message: d.message };
    if (!(await etcd.removeOwner(d.revision)))
      refuse(
        `the cluster's ownership marker changed while it was being removed (another run claimed or released ` +
          `it); nothing was removed. Run \`molt plan --stack ${o.stack}\` to see who owns it now`,
      );
    return {
      stack: o.stack,
      result: "released",
      owner: d.marker,
      message:
        `removed the cluster's ownership marker naming ${describeOwner(self)} (claimed by molt ${d.marker.by} at ` +
        `${d.marker.claimedAt}). No stack owns the cluster now: the next adoption or rollout of a stack claims it ` +
        `(a rollout of stack ${o.stack} too: stop using it for this cluster)`,
    };
  } finally {
    await run.close();
  }
}
