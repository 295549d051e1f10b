// molt:rollout.pruneWithNextSurge: the destruction of a retired node and the creation of
// the next one in one engine run. Not a rule of its own: the planner decides the prune as
// always, then decides again on the world as it will be once that prune is done; only when
// that second decision is a surge are the two one operation. So every rule that would stand
// between the prune and the surge (a node turning unhealthy aside, which the surge's own
// join checks) stands between them here too: a replacement boundary (--max-replacements, a
// closed window), kubeadm-config, a hook, a stale Node, a VIP not yet settled.
//
// In the one `up` the engine creates the new node first (its join runs against the cluster
// as observed for this decision) and deletes the retired node's resources after the
// program has registered everything, so the retired machine, which has no etcd member and
// serves nothing, goes last. One machine more than with separate runs is in flight then.
import type { Operation, World } from "../model";

type Prune = Extract<Operation, { kind: "prune" }>;

/** The world once `prune` is done: its node, endpoint and observations gone (and its Node, when the act deletes it). */
export function worldAfterPrune(s: World, prune: Prune): World | undefined {
  const name = prune.node;
  // The cluster-wide Kubernetes reads went through the node that goes: nothing to reuse.
  if (s.kube?.via === name) return undefined;
  const without = <T>(r: Record<string, T>): Record<string, T> =>
    Object.fromEntries(Object.entries(r).filter(([k]) => k !== name));
  const { certificates, kube, vip, etcd } = s;
  return {
    ...s,
    nodes: s.nodes.filter((n) => n.name !== name),
    endpoints: s.endpoints.filter((e) => e.name !== name),
    ...(etcd ? { etcd: { ...etcd, status: without(etcd.status) } } : {}),
    ...(kube
      ? {
          kube: {
            ...kube,
            // The act deletes the Node right after the machine; without `deleteNodeVia` it stays.
            nodes: prune.deleteNodeVia ? kube.nodes.filter((n) => n.name !== name) : kube.nodes,
            components: without(kube.components),
            evictable: without(kube.evictable),
          },
        }
      : {}),
    ...(vip
      ? {
          vip: {
            ...vip,
            holders: vip.holders.filter((h) => h !== name),
            unobserved: vip.unobserved.filter((h) => h !== name),
            states: without(vip.states),
          },
        }
      : {}),
    ...(certificates ? { certificates: without(certificates) } : {}),
  };
}

/**
 * With molt:rollout.pruneWithNextSurge, a prune whose next decision (on the world after it)
 * is a surge becomes one `prune-and-surge`; anything else is left as decided.
 */
export function withNextSurge(
  s: World,
  op: Operation,
  decideAgain: (after: World) => Operation,
): Operation | undefined {
  if (!s.intent.rollout.pruneWithNextSurge || s.intent.rollout.maxSurge !== 1 || op.kind !== "prune") return undefined;
  const after = worldAfterPrune(s, op);
  if (!after) return undefined;
  const next = decideAgain(after);
  if (next.kind !== "surge") return undefined;
  // The new node must be new next to the retired one too, which is still there during the `up`:
  // a newer generation (the pruned node may be the newest: a join that never happened, whose
  // name the world after it would give again) and, with static addresses, not its address.
  const { entry } = next;
  const clash = s.nodes.some(
    (n) =>
      n.name === entry.name || n.generation >= entry.generation || (!!entry.address && n.address === entry.address),
  );
  if (clash) return undefined;
  return {
    kind: "prune-and-surge",
    node: op.node,
    ...(op.deleteNodeVia ? { deleteNodeVia: op.deleteNodeVia } : {}),
    entry: next.entry,
    ...(next.hostFiles ? { hostFiles: next.hostFiles } : {}),
    reason: `${op.reason}; then ${next.reason} (one engine run: molt:rollout.pruneWithNextSurge)`,
  };
}
