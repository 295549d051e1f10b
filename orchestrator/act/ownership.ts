// Claiming the cluster for the stack (core/ownership.ts): the marker is written in one
// transaction that requires it absent (or, for --take-over, unchanged since it was read). A
// claim that lands second finds another stack's marker: the run stops there, refused.
import { describeOwner, ownerMarkerJson, ownerReadOf, sameOwner } from "../core/ownership";
import type { Act } from "./context";

export const claimOwnership: Act<"claim-ownership"> = async (op, ctx) => {
  const etcd = await ctx.edges.nodes.etcd();
  const value = ownerMarkerJson({ ...op.owner, claimedAt: new Date().toISOString(), by: "rollout" });
  const r = await ctx.timed("etcd", op.kind, undefined, () => etcd.writeOwner(value, op.ifRevision));
  if (r.ok) return { kind: "done" };
  const now = ownerReadOf(r.current);
  // Its own claim landed already (the answer was lost and the call went to another member).
  if (now.kind === "claimed" && sameOwner(now.marker, op.owner)) return { kind: "done" };
  const holder =
    now.kind === "claimed"
      ? `${describeOwner(now.marker)} claimed it first (molt ${now.marker.by} at ${now.marker.claimedAt})`
      : now.kind === "absent"
        ? "its marker was removed meanwhile"
        : `its marker changed meanwhile (${now.kind === "invalid" ? now.why : now.kind})`;
  return {
    kind: "stop",
    result: "refused",
    reason:
      `ClusterOwnedByAnotherStack: ${describeOwner(op.owner)} could not claim the cluster: ${holder}; the run ` +
      `stops here, before it changes anything else. Run \`molt plan --stack ${op.owner.stack}\` to see who owns ` +
      `it now`,
  };
};
