// The planner: one snapshot in, exactly one next operation out. Pure, so every safety rule
// is a plain function tested with tables and properties (test/unit/plan.test.ts).
import type { EndpointStatus, Intent, Member, NodeEntry, Operation, Snapshot } from "./model";

export function quorum(voters: number): number {
  return Math.floor(voters / 2) + 1;
}

/** Is the entry what the intent asks for? (Cluster API: version or infrastructure differs.) */
export function isOutdated(entry: NodeEntry, intent: Intent): boolean {
  return (
    entry.image !== intent.image || (entry.kubernetesVersion ?? undefined) !== (intent.kubernetesVersion ?? undefined)
  );
}

export function memberOfNode(members: Member[], node: NodeEntry, address: string | undefined): Member | undefined {
  return (
    members.find((m) => m.name === node.name) ??
    (address ? members.find((m) => m.name === "" && m.peerURLs.some((u) => u.includes(`//${address}:`))) : undefined)
  );
}

function statusOf(s: Snapshot, node: string): EndpointStatus | undefined {
  const r = s.etcd?.status[node];
  return r && r.ok ? r.status : undefined;
}

function statusError(s: Snapshot, node: string): string {
  const r = s.etcd?.status[node];
  if (!r) return "not observed";
  return r.ok ? r.status.errors.join("; ") || "ok" : r.error;
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
  for (const r of Object.values(s.etcd?.status ?? {}))
    if (r.ok && r.status.memberId === leaderId) return r.status.raftAppliedIndex;
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

const nodeNamePrefix = (stack: string) => `${stack}-cp-`.toLowerCase().replace(/[^a-z0-9-]/g, "-");

export function nextNodeName(nodes: NodeEntry[], stack: string, generation: number): string {
  const base = `${nodeNamePrefix(stack)}${generation}`;
  return nodes.some((n) => n.name === base) ? `${base}-x` : base;
}

/** Is `name` a node name molt would give in this stack? */
export function isNodeName(stack: string, name: string): boolean {
  const p = nodeNamePrefix(stack);
  return name.startsWith(p) && /^\d+(-x)?$/.test(name.slice(p.length));
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

const semverParts = (v: string): [number, number, number] | undefined => {
  const m = /^v?(\d+)\.(\d+)\.(\d+)/.exec(v);
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : undefined;
};

/**
 * Kubernetes version rules of an upgrade (kubeadm / Cluster API): no downgrade, and no
 * skipping a minor: every node must be at the target version or one minor below it.
 * Returns the problem, or undefined when the rollout may go on.
 */
export function kubernetesVersionProblem(nodes: NodeEntry[], target: string | undefined): string | undefined {
  if (!target) return undefined;
  const t = semverParts(target);
  if (!t) return `the target Kubernetes version "${target}" is not a version`;
  for (const n of nodes) {
    if (!n.kubernetesVersion) continue;
    const v = semverParts(n.kubernetesVersion);
    if (!v) return `node ${n.name} records Kubernetes version "${n.kubernetesVersion}", which is not a version`;
    const cmp = t[0] - v[0] || t[1] - v[1] || t[2] - v[2];
    if (cmp < 0)
      return `${n.name} runs Kubernetes ${n.kubernetesVersion}, newer than the target ${target}: downgrades are not supported (etcd and the API's stored objects may already use the newer version); restore from a backup instead`;
    if (t[0] !== v[0] || t[1] - v[1] > 1)
      return `${n.name} runs Kubernetes ${n.kubernetesVersion} and the target ${target} skips a minor version: upgrade one minor at a time (${v[0]}.${v[1] + 1} first)`;
  }
  return undefined;
}

/**
 * etcd's own rules for a new member: it must not join a cluster whose version is above its
 * own, and may be at most one minor above it. The cluster version etcd decides is the
 * lowest server version of its members, so that is what is compared.
 */
export function etcdVersionProblem(members: string[], joining: string | undefined): string | undefined {
  if (!joining || members.length === 0) return undefined;
  const j = semverParts(joining);
  const parsed = members.map(semverParts).filter((v): v is [number, number, number] => v !== undefined);
  if (!j || parsed.length === 0) return undefined;
  const byMinor = (a: [number, number, number], b: [number, number, number]) => a[0] - b[0] || a[1] - b[1];
  const cluster = parsed.reduce((a, b) => (byMinor(a, b) <= 0 ? a : b));
  if (byMinor(j, cluster) < 0)
    return `the new node's etcd ${joining} is older than the cluster version ${cluster[0]}.${cluster[1]}: an etcd member never joins a cluster of a newer version`;
  if (j[0] !== cluster[0] || j[1] > cluster[1] + 1)
    return `the new node's etcd ${joining} is more than one minor above the cluster version ${cluster[0]}.${cluster[1]}: etcd upgrades go one minor at a time`;
  return undefined;
}

/** Why a node's Kubernetes control plane is not healthy, or undefined. */
export function kubeProblem(s: Snapshot, node: string): string | undefined {
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

/**
 * How long a wait the planner decided may last before its key expires: a join has the join
 * deadline; the kube-proxy rollout after an upgrade moves pods on every node of the cluster
 * (workers too), like a drain; anything else is a transient condition.
 */
export function waitDeadlineSeconds(key: string, t: Intent["timeouts"]): number {
  if (key.startsWith("join:")) return t.joinSeconds;
  if (key === "addons") return Math.max(t.settleSeconds, t.drainSeconds);
  return t.settleSeconds;
}

/** Seconds after which a Node whose Lease was not renewed belongs to no running machine. */
export const STALE_LEASE_SECONDS = 40;

export function decide(s: Snapshot, stack: string): Operation {
  const { intent } = s;
  const addressOf = (name: string) => s.endpoints.find((e) => e.name === name)?.privateAddress;

  if (s.nodes.length === 0) {
    return {
      kind: "create-first",
      entry: newEntry(s, stack, true),
      reason: "the stack has no control-plane node: initialise a new cluster",
    };
  }
  const skew = kubernetesVersionProblem(s.nodes, intent.kubernetesVersion);
  if (skew) return { kind: "refuse", condition: "KubernetesVersionSkew", reason: skew };
  if (!s.etcd) {
    return {
      kind: "refuse",
      condition: "EtcdClusterHealthy",
      reason: `etcd cannot be observed: ${s.etcdError ?? "unknown"}`,
    };
  }
  const { members, alarms } = s.etcd;

  if (alarms.length > 0) {
    return {
      kind: "refuse",
      condition: "EtcdClusterHealthy",
      reason: `etcd has active alarms: ${alarms.map((a) => `${a.alarm} on member ${a.memberId}`).join(", ")}; resolve them (e.g. compact + defragment + disarm NOSPACE) first`,
    };
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

  // Declared dead by the operator: only ever an unhealthy member (a healthy one is replaced
  // add-first by an ordinary rollout, never removed first).
  for (const name of intent.replaceDead ?? []) {
    const n = s.nodes.find((x) => x.name === name);
    const m = n && members.find((mm) => memberOfNode([mm], n, addressOf(n.name)));
    if (m && !m.isLearner && healthyIds.has(m.id)) {
      return {
        kind: "refuse",
        condition: "EtcdMemberHealthy",
        reason: `--replace-dead ${name}: its etcd member is healthy; nothing was changed. A healthy node is replaced add-first by a rollout without --replace-dead`,
      };
    }
  }

  // Stray members (no node): remove one per pass, first, so a replacement can be added
  // (etcd 3.4 refuses adds while a voter is down), and only with quorum kept.
  const stray = members.find((m) => nodeOfMember(m) === undefined);
  if (stray) {
    if (!stray.isLearner && !canSafelyRemoveMember(voters, healthyIds, stray.id)) {
      return {
        kind: "refuse",
        condition: "EtcdMembersMatchNodes",
        reason: `etcd member ${stray.name || stray.id} has no node, and removing it would lose quorum; restore quorum by hand first`,
      };
    }
    return {
      kind: "remove-stray-member",
      memberId: stray.id,
      name: stray.name,
      reason: `etcd member ${stray.name || "(unstarted) " + stray.peerURLs.join(",")} has no node in the stack`,
    };
  }

  // Nodes without a member: retired (member already removed) or a join that never happened.
  const memberless = [...s.nodes]
    .sort((a, b) => a.generation - b.generation)
    .find((n) => !memberOfNode(members, n, addressOf(n.name)));
  if (memberless) {
    if (s.nodes.length === 1) {
      return {
        kind: "refuse",
        condition: "EtcdMembersMatchNodes",
        reason: `the only node ${memberless.name} has no etcd member; nothing to recover from automatically`,
      };
    }
    return {
      kind: "prune",
      node: memberless.name,
      reason: `${memberless.name} is not an etcd member (retired, or its join did not happen): destroy it`,
    };
  }

  const newest = [...s.nodes].sort((a, b) => b.generation - a.generation)[0];

  // Learners: promote when caught up, otherwise wait within the join deadline.
  const learners = members.filter((m) => m.isLearner);
  for (const l of learners) {
    const node = nodeOfMember(l)!;
    const st = statusOf(s, node.name);
    const la = leaderApplied(s, leaderId);
    const key = `join:${node.name}`;
    if (
      st &&
      st.errors.length === 0 &&
      st.leader !== "0" &&
      st.leader === leaderId &&
      la !== undefined &&
      st.raftAppliedIndex >= la - BigInt(intent.rollout.maxAppliedLag) &&
      l.name !== ""
    ) {
      return {
        kind: "promote",
        node: node.name,
        memberId: l.id,
        reason: `learner ${node.name} has caught up with the leader`,
      };
    }
    if (s.expired.includes(key))
      return failNewNode(
        s,
        node.name,
        l.id,
        `learner ${node.name} did not start or catch up within the join deadline (${statusError(s, node.name)})`,
      );
    return {
      kind: "wait",
      key,
      node: node.name,
      reason: `learner ${node.name} is catching up (${statusError(s, node.name)})`,
    };
  }

  // Unhealthy voters: the node molt just added gets its join deadline, then is rolled
  // back; an old node that is unhealthy stops the rollout (nothing is removed for it).
  for (const m of voters) {
    if (healthyIds.has(m.id)) continue;
    const node = nodeOfMember(m)!;
    if (intent.replaceDead?.includes(node.name)) {
      if (!canSafelyRemoveMember(voters, healthyIds, m.id)) {
        return {
          kind: "refuse",
          condition: "EtcdQuorum",
          reason: `--replace-dead ${node.name}: removing its member would leave too few healthy voters for quorum; restore quorum first (etcd disaster recovery from a snapshot)`,
        };
      }
      return {
        kind: "remove-member",
        node: node.name,
        memberId: m.id,
        reason: `${node.name} was declared dead: its unhealthy member goes first (remove-first, as etcd advises for a failed member), then the node is destroyed and replaced`,
      };
    }
    if (node.name === s.joining && node.name === newest.name && s.nodes.length > 1) {
      const key = `join:${node.name}`;
      if (s.expired.includes(key))
        return failNewNode(
          s,
          node.name,
          m.id,
          `new node ${node.name} did not become a healthy, caught-up voter within the join deadline (${statusError(s, node.name)})`,
        );
      return {
        kind: "wait",
        key,
        node: node.name,
        reason: `waiting for ${node.name} to become a healthy, caught-up voter (${statusError(s, node.name)})`,
      };
    }
    const key = `health:${node.name}`;
    if (s.expired.includes(key)) {
      return {
        kind: "refuse",
        condition: "EtcdMemberHealthy",
        reason: `etcd member of ${node.name} is not healthy (${statusError(s, node.name)}); no node was changed. Recover it, or replace it remove-first with \`molt rollout --stack ${stack} --replace-dead ${node.name}\` (README "Recovering a dead member")`,
      };
    }
    return {
      kind: "wait",
      key,
      node: node.name,
      reason: `etcd member of ${node.name} is not healthy yet (${statusError(s, node.name)})`,
    };
  }

  if (!leaderId) {
    if (s.expired.includes("leader"))
      return { kind: "refuse", condition: "EtcdClusterHealthy", reason: "the etcd members do not agree on a leader" };
    return { kind: "wait", key: "leader", reason: "waiting for the etcd members to agree on a leader" };
  }

  const outdated = s.nodes.filter((n) => isOutdated(n, intent));
  const tooMany = s.nodes.length > intent.replicas;
  const retireFirst = outdated.length > 0 && s.nodes.length === intent.replicas && intent.rollout.maxSurge === 0;
  const victim = tooMany || retireFirst ? selectNodeForRetirement(s.nodes, intent)! : undefined;

  // Kubernetes: every node's API server, controller-manager, scheduler and Node must be
  // healthy too (the victim's may already be going: it is cordoned and being retired).
  if (intent.kubernetesVersion !== undefined) {
    if (!s.kube) {
      if (s.expired.includes("kube"))
        return {
          kind: "refuse",
          condition: "KubernetesAPIReachable",
          reason: `the Kubernetes API cannot be observed: ${s.kubeError ?? "unknown"}`,
        };
      return { kind: "wait", key: "kube", reason: `waiting for the Kubernetes API: ${s.kubeError ?? "unknown"}` };
    }
    for (const n of [...s.nodes].sort((a, b) => a.generation - b.generation)) {
      const problem = kubeProblem(s, n.name);
      if (!problem) continue;
      if (n.name === victim?.name && s.kube.nodes.find((k) => k.name === n.name)?.unschedulable) continue;
      if (n.name === s.joining && n.name === newest.name && s.nodes.length > 1) {
        const key = `join:${n.name}`;
        if (s.expired.includes(key))
          return failNewNode(
            s,
            n.name,
            memberOfNode(members, n, addressOf(n.name))?.id,
            `new node ${n.name}'s control plane did not become healthy within the join deadline (${problem})`,
          );
        return { kind: "wait", key, node: n.name, reason: `waiting for ${n.name}'s control plane (${problem})` };
      }
      const key = `health:${n.name}`;
      if (s.expired.includes(key))
        return {
          kind: "refuse",
          condition: "KubernetesControlPlaneHealthy",
          reason: `the control plane of ${n.name} is not healthy (${problem}); no node was changed`,
        };
      return { kind: "wait", key, node: n.name, reason: `control plane of ${n.name} is not healthy yet (${problem})` };
    }
    // Control-plane Nodes of this stack's naming that no stack node owns: machines molt
    // destroyed (a crash came between the destroy and the Node's deletion). Deleted once
    // their Lease shows no kubelet is left; a Node still renewing is a machine molt does
    // not know, and stops the rollout.
    const prefix = nextNodeName([], stack, 0).replace(/-0$/, "-");
    for (const k of s.kube.nodes) {
      if (!k.controlPlane || !k.name.startsWith(prefix) || s.nodes.some((n) => n.name === k.name)) continue;
      if (k.leaseAgeSeconds === undefined || k.leaseAgeSeconds > STALE_LEASE_SECONDS)
        return {
          kind: "delete-node",
          node: k.name,
          reason: `Node ${k.name} belongs to no node of the stack (its machine is gone)`,
        };
      const key = `stale-node:${k.name}`;
      if (s.expired.includes(key))
        return {
          kind: "refuse",
          condition: "KubernetesNodesMatchStack",
          reason: `control-plane Node ${k.name} is not in the stack but its kubelet still renews its Lease: a machine molt does not manage runs under this stack's node names`,
        };
      return {
        kind: "wait",
        key,
        node: k.name,
        reason: `Node ${k.name} is not in the stack; waiting for its Lease to expire`,
      };
    }
  }

  // Everything is healthy from here on: exactly one membership or machine change.
  if (victim) {
    const member = memberOfNode(members, victim, addressOf(victim.name))!;
    // Whether the member may go at all is decided before the node is touched (drained,
    // its API server stopped): a retirement that would be refused changes nothing.
    if (!canSafelyRemoveMember(voters, healthyIds, member.id)) {
      return {
        kind: "refuse",
        condition: "EtcdClusterHealthy",
        reason: `removing ${victim.name} would leave fewer healthy voters than quorum`,
      };
    }
    const leaderTarget =
      member.id === leaderId
        ? [...s.nodes]
            .filter((n) => n.name !== victim.name)
            .sort(
              (a, b) => Number(isOutdated(a, intent)) - Number(isOutdated(b, intent)) || b.generation - a.generation,
            )
            .map((n) => ({ n, m: memberOfNode(members, n, addressOf(n.name)) }))
            .find(({ m }) => m && healthyIds.has(m.id) && !m.isLearner)
        : undefined;
    if (member.id === leaderId && !leaderTarget)
      return {
        kind: "refuse",
        condition: "EtcdClusterHealthy",
        reason: `no healthy voter to move leadership to from ${victim.name}`,
      };
    if (intent.kubernetesVersion !== undefined && s.kube) {
      const k = s.kube.nodes.find((n) => n.name === victim.name);
      if (k && (!k.unschedulable || (s.kube.evictable[victim.name] ?? 0) > 0)) {
        return {
          kind: "drain",
          node: victim.name,
          reason: `retire ${victim.name}: cordon and drain it first (${s.kube.evictable[victim.name] ?? 0} pod(s) to evict, PodDisruptionBudgets honoured)`,
        };
      }
      // Its API server goes before its etcd member: stopped gracefully, it fails /readyz
      // while still serving, so the load balancer drops it before a request can reach an
      // API server whose etcd is gone.
      if (k && s.kube.components[victim.name]?.apiserver.ok) {
        return {
          kind: "stop-apiserver",
          node: victim.name,
          reason: `retire ${victim.name}: stop its kube-apiserver gracefully, out of the load balancer, before its etcd member is removed`,
        };
      }
    }
    if (leaderTarget) {
      return {
        kind: "move-leader",
        from: victim.name,
        to: leaderTarget.n.name,
        toId: leaderTarget.m!.id,
        reason: `${victim.name} leads etcd and is to be retired: move leadership to ${leaderTarget.n.name} first`,
      };
    }
    const why = tooMany ? (isOutdated(victim, intent) ? "outdated" : "surplus") : "outdated; maxSurge 0: retire first";
    return {
      kind: "remove-member",
      node: victim.name,
      memberId: member.id,
      reason: `retire ${victim.name} (${why}): remove its etcd member, then destroy it`,
    };
  }

  if (s.nodes.length < intent.replicas || outdated.length > 0) {
    // kubeadm join reads the cluster's configuration: it names the version being rolled to
    // before the first node of that version joins (Cluster API does the same).
    // etcd's rules first: a refusal must come before any change.
    const etcdProblem = etcdVersionProblem(
      Object.values(s.etcd.status).flatMap((r) => (r.ok ? [r.status.version] : [])),
      intent.etcdVersion,
    );
    if (etcdProblem) return { kind: "refuse", condition: "EtcdVersionSkew", reason: etcdProblem };
    const cc = s.kube?.clusterConfigVersion;
    if (intent.kubernetesVersion !== undefined && cc !== undefined && cc !== intent.kubernetesVersion) {
      return {
        kind: "update-cluster-config",
        version: intent.kubernetesVersion,
        reason: `kubeadm-config says ${cc}; set it to ${intent.kubernetesVersion} before ${intent.kubernetesVersion} nodes join`,
      };
    }
  }
  if (s.nodes.length < intent.replicas) {
    const entry = newEntry(s, stack, false);
    return {
      kind: "surge",
      entry,
      reason:
        outdated.length > 0 || s.nodes.length < intent.replicas
          ? `${s.nodes.length}/${intent.replicas} nodes: add ${entry.name}`
          : `add ${entry.name}`,
    };
  }
  if (outdated.length > 0) {
    const entry = newEntry(s, stack, false);
    return {
      kind: "surge",
      entry,
      reason: `${outdated.length} outdated node(s) (${outdated.map((n) => n.name).join(", ")}): add ${entry.name} first`,
    };
  }
  if (intent.kubernetesVersion !== undefined && s.kube) {
    const cc = s.kube.clusterConfigVersion;
    if (cc !== undefined && cc !== intent.kubernetesVersion) {
      return {
        kind: "update-cluster-config",
        version: intent.kubernetesVersion,
        reason: `every node runs ${intent.kubernetesVersion} but kubeadm-config says ${cc}`,
      };
    }
    const proxy = s.kube.kubeProxy;
    if (proxy && proxy.version !== intent.kubernetesVersion) {
      return {
        kind: "update-addons",
        version: intent.kubernetesVersion,
        reason: `every control-plane node runs ${intent.kubernetesVersion}: update kube-proxy (${proxy.version}) and CoreDNS to its versions`,
      };
    }
    if (proxy && !proxy.rolledOut) {
      if (s.expired.includes("addons"))
        return {
          kind: "refuse",
          condition: "AddonsRolledOut",
          reason:
            "the kube-proxy DaemonSet did not finish rolling out within molt:timeouts.drainSeconds; every control-plane node already runs the target version. Check its pods, then run molt again to wait for it",
        };
      return { kind: "wait", key: "addons", reason: "waiting for the kube-proxy DaemonSet to roll out" };
    }
  }
  return {
    kind: "done",
    reason: `${s.nodes.length} nodes on ${intent.image}${intent.kubernetesVersion ? ` / Kubernetes ${intent.kubernetesVersion}` : ""}, all healthy voters`,
  };
}

function failNewNode(s: Snapshot, node: string, memberId: string | undefined, reason: string): Operation {
  if (s.intent.rollout.onFailure === "pause")
    return { kind: "pause", node, reason: `${reason}; left in place for inspection (--on-failure pause)` };
  return { kind: "rollback", node, memberId, reason: `${reason}; rolling it back` };
}
