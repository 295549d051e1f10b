// etcd membership changes, each sent where the planner said. etcd's own guards refuse some
// for a moment (plan/waits.ts isTransientEtcdRefusal): those are retried after observing again.
import type { EtcdEdge } from "../core/edges";
import { retryKeyOf } from "../core/memory";
import type { Operation } from "../core/model";
import { isTransientEtcdRefusal } from "../core/plan";
import type { Act } from "./context";

type Membership = Extract<
  Operation,
  { kind: "promote-learner" | "move-leader" | "remove-member" | "remove-stray-member" }
>;

function call(op: Membership, etcd: EtcdEdge): Promise<void> {
  switch (op.kind) {
    case "promote-learner":
      return etcd.promoteLearner(op.via, op.memberId);
    case "move-leader":
      return etcd.moveLeader(op.from, op.toId);
    case "remove-member":
    case "remove-stray-member":
      return etcd.memberRemove(op.via, op.memberId);
  }
}

export const membership: Act<Membership["kind"]> = async (op, ctx) => {
  const subject = op.kind === "move-leader" ? op.from : op.kind === "remove-stray-member" ? op.name : op.node;
  const etcd = await ctx.edges.nodes.etcd();
  try {
    await ctx.timed("etcd", op.kind, subject, () => call(op, etcd));
    return { kind: "done" };
  } catch (e) {
    const message = (e as Error).message.split("\n")[0];
    if (!isTransientEtcdRefusal(message)) throw e;
    ctx.report({
      type: "phase",
      phase: "etcd",
      operation: op.kind,
      node: subject,
      ms: 0,
      ok: false,
      detail: `etcd refused for now, will retry: ${message}`,
    });
    return { kind: "retry", key: retryKeyOf(op)!, why: message };
  }
};
