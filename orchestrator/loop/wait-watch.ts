// A wait watched instead of re-observed: between two full passes, the loop re-reads only
// what the wait is for (observe.ts reobserveNode, reobserveAddons, reobserveLb) every `tickMs` and asks the
// planner again on that world. The wait ends for a full pass as soon as that decision is no
// longer the same wait (the condition turned true, or a read failed), at the wait's deadline,
// or after `fullEveryMs` in any case, so the rest of the world is still seen regularly. No
// change is ever decided here: every change follows a full observation.
import { pause } from "../../lib/poll";
import type { Operation, WaitKey, World } from "../core/model";

type Wait = Extract<Operation, { kind: "wait" }>;

/**
 * What a wait is watched by: the waits whose end a few reads show, a join or a node's health
 * (that node's reads), kube-proxy's rollout (its DaemonSet) and, where the load balancer is
 * cheap to ask (`lbWatchable`, core/edges.ts LoadBalancerEdge.watchable), its view of a
 * target. Other waits (a leader election, a soak, a stale Node's Lease, a refused etcd
 * call's retry) poll as before.
 */
export type Watch = { node: string } | { addons: true } | { lb: true };

export function watchOf(op: Operation, lbWatchable = false): Watch | undefined {
  if (op.kind !== "wait") return undefined;
  if (op.key === "addons") return { addons: true };
  if (op.key.startsWith("lb:")) return lbWatchable ? { lb: true } : undefined;
  if (!op.node) return undefined;
  return op.key.startsWith("join:") || op.key.startsWith("health:") ? { node: op.node } : undefined;
}

export interface WatchOptions {
  world: World;
  op: Wait;
  decide: (w: World) => Operation;
  /** The last pass's world with what the wait is for read again. */
  reread: (w: World) => Promise<World>;
  tickMs: number;
  fullEveryMs: number;
  /** When the wait's key expires (ms on `now`'s clock): the next full pass must see it. */
  deadline: number;
  now: () => number;
  signal?: AbortSignal;
}

export type WatchEnd = "changed" | "deadline" | "full-pass" | "cancelled";

export async function watchWait(o: WatchOptions): Promise<WatchEnd> {
  const stopAt = Math.min(o.now() + o.fullEveryMs, o.deadline);
  for (;;) {
    const left = stopAt - o.now();
    if (left <= 0) return stopAt === o.deadline ? "deadline" : "full-pass";
    await pause(Math.min(o.tickMs, left), o.signal);
    if (o.signal?.aborted) return "cancelled";
    let world: World;
    try {
      world = await o.reread(o.world);
    } catch {
      return "changed"; // the full pass reads it again, and says why
    }
    if (!sameWait(o.decide(world), o.op.key)) return "changed";
  }
}

const sameWait = (op: Operation, key: WaitKey) => op.kind === "wait" && op.key === key;
