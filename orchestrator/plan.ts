// The planner: one snapshot in, exactly one next operation out. Pure, so every safety rule
// is a plain function tested with tables and properties (test/unit/plan.test.ts).
import type { EndpointStatus, Intent, Member, NodeEntry, Operation, Snapshot } from "./model";

export function quorum(voters: number): number {
  return Math.floor(voters / 2) + 1;
}

/** Is the entry what the intent asks for? (Cluster API: version or infrastructure differs.) */
export function isOutdated(entry: NodeEntry, intent: Intent): boolean {
  return entry.image !== intent.image || (entry.kubernetesVersion ?? undefined) !== (intent.kubernetesVersion ?? undefined);
}

export function memberOfNode(members: Member[], node: NodeEntry, address: string | undefined): Member | undefined {
  return members.find((m) => m.name === node.name) ?? (address ? members.find((m) => m.name === "" && m.peerURLs.some((u) => u.includes(`//${address}:`))) : undefined);
}

function statusOf(s: Snapshot, node: string): EndpointStatus | undefined {
  const r = s.etcd?.status[node];
  return r && r.ok ? r.status : undefined;
}

function statusError(s: Snapshot, node: string): string {
  const r = s.etcd?.status[node];
  if (!r) return "not observed";
  return r.ok ? (r.status.errors.join("; ") || "ok") : r.error;
}

/** The leader every reachable member agrees on, if any. */
export function agreedLeader(s: Snapshot): string | undefined {
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

function leaderApplied(s: Snapshot, leaderId: string | undefined): bigint | undefined {
  if (!leaderId) return undefined;
  for (const r of Object.values(s.etcd?.status ?? {})) if (r.ok && r.status.memberId === leaderId) return r.status.raftAppliedIndex;
  return undefined;
}

/** Healthy voter: its own endpoint answers, no errors, a voter, and caught up with the leader. */
export function isHealthyVoter(s: Snapshot, node: string, leaderId: string | undefined): boolean {
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

/** Oldest outdated node first; when none is outdated (scale-in), the oldest node. */
export function selectNodeForRetirement(nodes: NodeEntry[], intent: Intent): NodeEntry | undefined {
  const byAge = [...nodes].sort((a, b) => a.generation - b.generation);
  return byAge.find((n) => isOutdated(n, intent)) ?? byAge[0];
}

export function nextNodeName(nodes: NodeEntry[], stack: string, generation: number): string {
  const base = `${stack}-cp-${generation}`.toLowerCase().replace(/[^a-z0-9-]/g, "-");
  return nodes.some((n) => n.name === base) ? `${base}-x` : base;
}

export function newEntry(s: Snapshot, stack: string, init: boolean): NodeEntry {
  const generation = Math.max(0, ...s.nodes.map((n) => n.generation)) + 1;
  return {
    name: nextNodeName(s.nodes, stack, generation),
    image: s.intent.image,
    ...(s.intent.kubernetesVersion ? { kubernetesVersion: s.intent.kubernetesVersion } : {}),
    role: "control-plane",
    generation,
    init,
  };
}

export function decide(s: Snapshot, stack: string): Operation {
  const { intent } = s;
  const addressOf = (name: string) => s.endpoints.find((e) => e.name === name)?.privateAddress;

  if (s.nodes.length === 0) {
    return { kind: "create-first", entry: newEntry(s, stack, true), reason: "the stack has no control-plane node: initialise a new cluster" };
  }
  if (!s.etcd) {
    return { kind: "refuse", condition: "EtcdClusterHealthy", reason: `etcd cannot be observed: ${s.etcdError ?? "unknown"}` };
  }
  const { members, alarms } = s.etcd;

  if (alarms.length > 0) {
    return { kind: "refuse", condition: "EtcdClusterHealthy", reason: `etcd has active alarms: ${alarms.map((a) => `${a.alarm} on member ${a.memberId}`).join(", ")}; resolve them (e.g. compact + defragment + disarm NOSPACE) first` };
  }

  const leaderId = agreedLeader(s);
  const voters = members.filter((m) => !m.isLearner);
  const nodeOfMember = (m: Member) => s.nodes.find((n) => memberOfNode([m], n, addressOf(n.name)));
  const healthyIds = new Set(
    voters
      .filter((m) => {
        const n = nodeOfMember(m);
        return n !== undefined && isHealthyVoter(s, n.name, leaderId);
      })
      .map((m) => m.id),
  );

  // Stray members (no node): remove one per pass, first, so a replacement can be added
  // (etcd 3.4 refuses adds while a voter is down), and only with quorum kept.
  const stray = members.find((m) => nodeOfMember(m) === undefined);
  if (stray) {
    if (!stray.isLearner && !canSafelyRemoveMember(voters, healthyIds, stray.id)) {
      return { kind: "refuse", condition: "EtcdMembersMatchNodes", reason: `etcd member ${stray.name || stray.id} has no node, and removing it would lose quorum; restore quorum by hand first` };
    }
    return { kind: "remove-stray-member", memberId: stray.id, name: stray.name, reason: `etcd member ${stray.name || "(unstarted) " + stray.peerURLs.join(",")} has no node in the stack` };
  }

  // Nodes without a member: retired (member already removed) or a join that never happened.
  const memberless = [...s.nodes].sort((a, b) => a.generation - b.generation).find((n) => !memberOfNode(members, n, addressOf(n.name)));
  if (memberless) {
    if (s.nodes.length === 1) {
      return { kind: "refuse", condition: "EtcdMembersMatchNodes", reason: `the only node ${memberless.name} has no etcd member; nothing to recover from automatically` };
    }
    return { kind: "prune", node: memberless.name, reason: `${memberless.name} is not an etcd member (retired, or its join did not happen): destroy it` };
  }

  const newest = [...s.nodes].sort((a, b) => b.generation - a.generation)[0];

  // Learners: promote when caught up, otherwise wait within the join deadline.
  const learners = members.filter((m) => m.isLearner);
  for (const l of learners) {
    const node = nodeOfMember(l)!;
    const st = statusOf(s, node.name);
    const la = leaderApplied(s, leaderId);
    const key = `join:${node.name}`;
    if (st && st.errors.length === 0 && st.leader !== "0" && st.leader === leaderId && la !== undefined && st.raftAppliedIndex >= la - BigInt(intent.rollout.maxAppliedLag) && l.name !== "") {
      return { kind: "promote", node: node.name, memberId: l.id, reason: `learner ${node.name} has caught up with the leader` };
    }
    if (s.expired.includes(key)) return failNewNode(s, node.name, l.id, `learner ${node.name} did not start or catch up within the join deadline (${statusError(s, node.name)})`);
    return { kind: "wait", key, node: node.name, reason: `learner ${node.name} is catching up (${statusError(s, node.name)})` };
  }

  // Unhealthy voters: the node molt just added gets its join deadline, then is rolled
  // back; an old node that is unhealthy stops the rollout (nothing is removed for it).
  for (const m of voters) {
    if (healthyIds.has(m.id)) continue;
    const node = nodeOfMember(m)!;
    if (node.name === s.joining && node.name === newest.name && s.nodes.length > 1) {
      const key = `join:${node.name}`;
      if (s.expired.includes(key)) return failNewNode(s, node.name, m.id, `new node ${node.name} did not become a healthy, caught-up voter within the join deadline (${statusError(s, node.name)})`);
      return { kind: "wait", key, node: node.name, reason: `waiting for ${node.name} to become a healthy, caught-up voter (${statusError(s, node.name)})` };
    }
    const key = `health:${node.name}`;
    if (s.expired.includes(key)) {
      return {
        kind: "refuse",
        condition: "EtcdMemberHealthy",
        reason: `etcd member of ${node.name} is not healthy (${statusError(s, node.name)}); no node was changed. Recover it, or replace it remove-first: see README "Recovering a dead member"`,
      };
    }
    return { kind: "wait", key, node: node.name, reason: `etcd member of ${node.name} is not healthy yet (${statusError(s, node.name)})` };
  }

  if (!leaderId) {
    if (s.expired.includes("leader")) return { kind: "refuse", condition: "EtcdClusterHealthy", reason: "the etcd members do not agree on a leader" };
    return { kind: "wait", key: "leader", reason: "waiting for the etcd members to agree on a leader" };
  }

  // Everything is healthy from here on: exactly one membership or machine change.
  const outdated = s.nodes.filter((n) => isOutdated(n, intent));
  const tooMany = s.nodes.length > intent.replicas;
  const retireFirst = outdated.length > 0 && s.nodes.length === intent.replicas && intent.rollout.maxSurge === 0;
  if (tooMany || retireFirst) {
    const victim = selectNodeForRetirement(s.nodes, intent)!;
    const member = memberOfNode(members, victim, addressOf(victim.name))!;
    if (member.id === leaderId) {
      const target = [...s.nodes]
        .filter((n) => n.name !== victim.name)
        .sort((a, b) => Number(isOutdated(a, intent)) - Number(isOutdated(b, intent)) || b.generation - a.generation)
        .map((n) => ({ n, m: memberOfNode(members, n, addressOf(n.name)) }))
        .find(({ m }) => m && healthyIds.has(m.id) && !m.isLearner);
      if (!target) return { kind: "refuse", condition: "EtcdClusterHealthy", reason: `no healthy voter to move leadership to from ${victim.name}` };
      return { kind: "move-leader", from: victim.name, to: target.n.name, toId: target.m!.id, reason: `${victim.name} leads etcd and is to be retired: move leadership to ${target.n.name} first` };
    }
    if (!canSafelyRemoveMember(voters, healthyIds, member.id)) {
      return { kind: "refuse", condition: "EtcdClusterHealthy", reason: `removing ${victim.name} would leave fewer healthy voters than quorum` };
    }
    const why = tooMany ? (isOutdated(victim, intent) ? "outdated" : "surplus") : "outdated; maxSurge 0: retire first";
    return { kind: "remove-member", node: victim.name, memberId: member.id, reason: `retire ${victim.name} (${why}): remove its etcd member, then destroy it` };
  }

  if (s.nodes.length < intent.replicas) {
    const entry = newEntry(s, stack, false);
    return { kind: "surge", entry, reason: outdated.length > 0 || s.nodes.length < intent.replicas ? `${s.nodes.length}/${intent.replicas} nodes: add ${entry.name}` : `add ${entry.name}` };
  }
  if (outdated.length > 0) {
    const entry = newEntry(s, stack, false);
    return { kind: "surge", entry, reason: `${outdated.length} outdated node(s) (${outdated.map((n) => n.name).join(", ")}): add ${entry.name} first` };
  }
  return { kind: "done", reason: `${s.nodes.length} nodes on ${intent.image}${intent.kubernetesVersion ? ` / Kubernetes ${intent.kubernetesVersion}` : ""}, all healthy voters` };
}

function failNewNode(s: Snapshot, node: string, memberId: string | undefined, reason: string): Operation {
  if (s.intent.rollout.onFailure === "pause") return { kind: "pause", node, reason: `${reason}; left in place for inspection (--on-failure pause)` };
  return { kind: "rollback", node, memberId, reason: `${reason}; rolling it back` };
}
