// The planner's safety rules and queries over one observed world: pure functions, tested
// with tables and properties (test/unit/plan.test.ts).
import { assignFailureDomain, selectNodeForRetirement as selectByFailureDomain } from "../placement";
import { assignStaticAddress } from "../addresses";
import type { EndpointStatus, Intent, Member, NodeEntry, World } from "../model";

export function quorum(voters: number): number {
  return Math.floor(voters / 2) + 1;
}

/**
 * Is the entry what the intent asks for? (Cluster API: version or infrastructure differs, or
 * certificates near expiry.) `certificates`: the observed expiry (World.certificates).
 */
export function isOutdated(entry: NodeEntry, intent: Intent, certificates?: World["certificates"]): boolean {
  // An adopted node is outdated by definition: molt replaces it with a node of its own.
  return (
    entry.adopted !== undefined ||
    entry.image !== intent.image ||
    (entry.kubernetesVersion ?? undefined) !== (intent.kubernetesVersion ?? undefined) ||
    certificateExpiring(certificates, entry.name)
  );
}

/** Does a certificate of the node expire within molt:rollout.replaceCertificatesExpiringWithinDays? */
export function certificateExpiring(certificates: World["certificates"], node: string): boolean {
  const c = certificates?.[node];
  return c !== undefined && c.ok && c.expiring;
}

export function memberOfNode(members: Member[], node: NodeEntry, address: string | undefined): Member | undefined {
  return (
    members.find((m) => m.name === node.name) ??
    (address ? members.find((m) => m.name === "" && m.peerURLs.some((u) => u.includes(`//${address}:`))) : undefined)
  );
}

export function statusOf(s: World, node: string): EndpointStatus | undefined {
  const r = s.etcd?.status[node];
  return r && r.ok ? r.status : undefined;
}

export function statusError(s: World, node: string): string {
  const r = s.etcd?.status[node];
  if (!r) return "not observed";
  return r.ok ? r.status.errors.join("; ") || "ok" : r.error;
}

/** The leader every reachable member agrees on, if any. */
export function agreedLeader(s: World): string | undefined {
  const leaders = new Set(
    Object.values(s.etcd?.status ?? {})
      .filter((r): r is { ok: true; status: EndpointStatus } => r.ok && !r.status.isLearner)
      .map((r) => r.status.leader)
      .filter((l) => l !== "0"),
  );
  if (leaders.size !== 1) return undefined;
  const [leader] = leaders;
  return s.etcd?.members.some((m) => m.id === leader && !m.isLearner) ? leader : undefined;
}

export function leaderApplied(s: World, leaderId: string | undefined): bigint | undefined {
  if (!leaderId) return undefined;
  for (const r of Object.values(s.etcd?.status ?? {}))
    if (r.ok && r.status.memberId === leaderId) return r.status.raftAppliedIndex;
  return undefined;
}

/** Healthy voter: its own endpoint answers, no errors, a voter, and caught up with the leader. */
export function isHealthyVoter(s: World, node: string, leaderId: string | undefined): boolean {
  const st = statusOf(s, node);
  if (!st || st.errors.length > 0 || st.isLearner || st.leader === "0") return false;
  const la = leaderApplied(s, leaderId);
  return la === undefined || la - st.raftAppliedIndex <= BigInt(s.intent.rollout.maxAppliedLag);
}

/**
 * Would the cluster still have quorum, counting only healthy voters, if `memberId` left?
 * (Cluster API: targetEtcdClusterHealthy before removing a member.)
 */
export function canSafelyRemoveMember(voters: Member[], healthyIds: Set<string>, memberId: string): boolean {
  const remaining = voters.filter((m) => m.id !== memberId);
  if (remaining.length === 0) return false;
  const healthyRemaining = remaining.filter((m) => healthyIds.has(m.id)).length;
  return healthyRemaining >= quorum(remaining.length);
}

/**
 * The node to retire: with failure domains, the oldest candidate in the domain with the
 * most nodes (orchestrator/core/placement.ts, as Cluster API picks); otherwise the oldest outdated
 * node; when none is outdated (scale-in), the oldest node.
 */
export function selectNodeForRetirement(
  nodes: NodeEntry[],
  intent: Intent,
  certificates?: World["certificates"],
): NodeEntry | undefined {
  const byAge = [...nodes].sort((a, b) => a.generation - b.generation);
  const outdated = byAge.filter((n) => isOutdated(n, intent, certificates));
  const candidates = outdated.length ? outdated : byAge.slice(0, 1);
  const domains = intent.failureDomains ?? [];
  if (domains.length > 0 && candidates.length > 0) {
    const placed = (n: NodeEntry) => ({ ...n, upToDate: !isOutdated(n, intent, certificates) });
    const pick = selectByFailureDomain(domains, nodes.map(placed), candidates.map(placed));
    if (pick) return nodes.find((n) => n.name === pick.name);
  }
  return candidates[0];
}

const nodeNamePrefix = (stack: string) => `${stack}-cp-`.toLowerCase().replace(/[^a-z0-9-]/g, "-");

export function nextNodeName(nodes: NodeEntry[], stack: string, generation: number): string {
  const base = `${nodeNamePrefix(stack)}${generation}`;
  return nodes.some((n) => n.name === base) ? `${base}-x` : base;
}

/** Does `name` start like the names of this stack's nodes? */
export function hasNodeNamePrefix(stack: string, name: string): boolean {
  return name.startsWith(nodeNamePrefix(stack));
}

/**
 * The entry of the next node: the intent's image and version, the next generation, and
 * its failure domain (the one with the fewest up-to-date nodes: orchestrator/core/placement.ts),
 * decided here once and stored with the entry, so a node's domain never moves.
 */
export function newEntry(s: World, stack: string, init: boolean): NodeEntry {
  const generation = Math.max(0, ...s.nodes.map((n) => n.generation)) + 1;
  const entry: NodeEntry = {
    name: nextNodeName(s.nodes, stack, generation),
    image: s.intent.image,
    ...(s.intent.kubernetesVersion ? { kubernetesVersion: s.intent.kubernetesVersion } : {}),
    role: "control-plane",
    generation,
    init,
  };
  // vSphere static addresses: one from the pool, kept for the node's life (orchestrator/core/addresses.ts).
  return assignStaticAddress(
    assignFailureDomain(entry, s.nodes, s.intent.failureDomains ?? []),
    s.nodes,
    s.intent.staticAddressPool ?? [],
  );
}

/** The node's SSH did not answer in this pass's observation (not merely its etcd). */
export function isUnreachable(s: World, node: string): boolean {
  const r = s.etcd?.status[node];
  return r !== undefined && !r.ok && r.unreachable === true;
}

/** Is `name` a node name molt would give in this stack? */
export function isNodeName(stack: string, name: string): boolean {
  const p = nodeNamePrefix(stack);
  return name.startsWith(p) && /^\d+(-x)?$/.test(name.slice(p.length));
}

/** Why a node's Kubernetes control plane is not healthy, or undefined. */
export function kubeProblem(s: World, node: string): string | undefined {
  const k = s.kube;
  if (!k) return `Kubernetes not observed: ${s.kubeError ?? "unknown"}`;
  const c = k.components[node];
  const problems: string[] = [];
  if (!c) problems.push("components not observed");
  else {
    if (!c.apiserver.ok) problems.push(`kube-apiserver not ready (${c.apiserver.error})`);
    if (!c.controllerManager.ok) problems.push(`kube-controller-manager not healthy (${c.controllerManager.error})`);
    if (!c.scheduler.ok) problems.push(`kube-scheduler not healthy (${c.scheduler.error})`);
  }
  const n = k.nodes.find((x) => x.name === node);
  if (!n) problems.push("no Node object");
  else if (!n.ready) problems.push("Node not Ready");
  return problems.length ? problems.join("; ") : undefined;
}

/** Seconds after which a Node whose Lease was not renewed belongs to no running machine. */
export const STALE_LEASE_SECONDS = 40;
