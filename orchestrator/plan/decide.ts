// The planner: one observed world in, exactly one next operation out. Each step below is
// one family of rules, tried in order; the first that has something to say decides.
import type { Operation, World } from "../model";
import {
  canSafelyRemoveMember,
  hasNodeNamePrefix,
  isOutdated,
  kubeProblem,
  leaderApplied,
  newEntry,
  STALE_LEASE_SECONDS,
  statusError,
  statusOf,
} from "./rules";
import { scopeOf, type Scope } from "./scope";
import { etcdVersionProblem, kubernetesVersionProblem } from "./versions";

type Step = (c: Scope) => Operation | undefined;

export function decide(s: World, stack: string): Operation {
  const early = cleanUpFailedSurge(s) ?? firstNode(s, stack) ?? preflight(s);
  if (early) return early;
  const c = scopeOf(s, stack);
  const steps: Step[] = [
    replaceDeadGuard,
    strayMember,
    memberlessNode,
    learners,
    unhealthyVoters,
    leader,
    kubernetesHealth,
    retire,
    grow,
    addons,
  ];
  for (const step of steps) {
    const op = step(c);
    if (op) return op;
  }
  const { intent } = s;
  return {
    kind: "done",
    reason: `${s.nodes.length} nodes on ${intent.image}${intent.kubernetesVersion ? ` / Kubernetes ${intent.kubernetesVersion}` : ""}, all healthy voters`,
  };
}

/** What a failed or killed surge left: resources of an unlisted node, or a rolled-back node already gone. */
function cleanUpFailedSurge(s: World): Operation | undefined {
  if (s.orphans.length > 0) {
    return {
      kind: "prune-orphans",
      nodes: s.orphans,
      reason: `the state holds resources of ${s.orphans.join(", ")}, which never reached the node list (a surge that failed or was killed): destroy them`,
    };
  }
  const rb = s.rollingBack;
  if (rb && !s.nodes.some((n) => n.name === rb.node)) {
    return {
      kind: "done",
      reason: rb.why
        ? `new node ${rb.node} could not be created (${rb.why}); the existing nodes were left untouched`
        : `new node ${rb.node} did not join; it was removed and the old nodes were left untouched`,
    };
  }
  return undefined;
}

function firstNode(s: World, stack: string): Operation | undefined {
  if (s.nodes.length > 0) return undefined;
  return {
    kind: "create-first",
    entry: newEntry(s, stack, true),
    reason: "the stack has no control-plane node: initialise a new cluster",
  };
}

function preflight(s: World): Operation | undefined {
  const skew = kubernetesVersionProblem(s.nodes, s.intent.kubernetesVersion);
  if (skew) return { kind: "refuse", condition: "KubernetesVersionSkew", reason: skew };
  if (!s.etcd) {
    return {
      kind: "refuse",
      condition: "EtcdClusterHealthy",
      reason: `etcd cannot be observed: ${s.etcdError ?? "unknown"}`,
    };
  }
  if (s.etcd.alarms.length > 0) {
    const alarms = s.etcd.alarms.map((a) => `${a.alarm} on member ${a.memberId}`).join(", ");
    return {
      kind: "refuse",
      condition: "EtcdClusterHealthy",
      reason: `etcd has active alarms: ${alarms}; resolve them (e.g. compact + defragment + disarm NOSPACE) first`,
    };
  }
  return undefined;
}

/** Declared dead by the operator: only ever an unhealthy member (a healthy one is replaced add-first). */
function replaceDeadGuard(c: Scope): Operation | undefined {
  for (const name of c.s.intent.replaceDead ?? []) {
    const n = c.s.nodes.find((x) => x.name === name);
    const m = n && c.memberOf(n);
    if (m && !m.isLearner && c.healthyIds.has(m.id)) {
      return {
        kind: "refuse",
        condition: "EtcdMemberHealthy",
        reason: `--replace-dead ${name}: its etcd member is healthy; nothing was changed. A healthy node is replaced add-first by a rollout without --replace-dead`,
      };
    }
  }
  return undefined;
}

/**
 * Stray members (no node): removed one per pass, first, so a replacement can be added
 * (etcd 3.4 refuses adds while a voter is down), and only with quorum kept.
 */
function strayMember(c: Scope): Operation | undefined {
  const stray = c.members.find((m) => c.nodeOf(m) === undefined);
  if (!stray) return undefined;
  if (!stray.isLearner && !canSafelyRemoveMember(c.voters, c.healthyIds, stray.id)) {
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
    via: c.via(),
    reason: `etcd member ${stray.name || "(unstarted) " + stray.peerURLs.join(",")} has no node in the stack`,
  };
}

/** Nodes without a member: retired (member already removed) or a join that never happened. */
function memberlessNode(c: Scope): Operation | undefined {
  const memberless = c.byAge.find((n) => !c.memberOf(n));
  if (!memberless) return undefined;
  if (c.s.nodes.length === 1) {
    return {
      kind: "refuse",
      condition: "EtcdMembersMatchNodes",
      reason: `the only node ${memberless.name} has no etcd member; nothing to recover from automatically`,
    };
  }
  // Its machine goes; with Kubernetes its Node object goes right after (Cluster API deletes
  // the Node after the machine), through an API server that is not its own.
  const via = c.s.kube?.via;
  return {
    kind: "prune",
    node: memberless.name,
    ...(via && via !== memberless.name ? { deleteNodeVia: via } : {}),
    reason: `${memberless.name} is not an etcd member (retired, or its join did not happen): destroy it`,
  };
}

/** Learners: promote when caught up, otherwise wait within the join deadline. */
function learners(c: Scope): Operation | undefined {
  const { s } = c;
  for (const l of c.members.filter((m) => m.isLearner)) {
    const node = c.nodeOf(l)!;
    const st = statusOf(s, node.name);
    const la = leaderApplied(s, c.leaderId);
    const key = `join:${node.name}` as const;
    const caughtUp =
      st &&
      st.errors.length === 0 &&
      st.leader !== "0" &&
      st.leader === c.leaderId &&
      la !== undefined &&
      st.raftAppliedIndex >= la - BigInt(s.intent.rollout.maxAppliedLag);
    if (caughtUp && l.name !== "") {
      return {
        kind: "promote",
        node: node.name,
        memberId: l.id,
        via: c.via(node.name),
        reason: `learner ${node.name} has caught up with the leader`,
      };
    }
    const why = statusError(s, node.name);
    if (s.expired.includes(key))
      return failNewNode(
        c,
        node.name,
        l.id,
        `learner ${node.name} did not start or catch up within the join deadline (${why})`,
      );
    return { kind: "wait", key, node: node.name, reason: `learner ${node.name} is catching up (${why})` };
  }
  return undefined;
}

/**
 * Unhealthy voters: the node molt just added gets its join deadline, then is rolled back;
 * an old node that is unhealthy stops the rollout (nothing is removed for it), unless the
 * operator declared it dead.
 */
function unhealthyVoters(c: Scope): Operation | undefined {
  const { s } = c;
  for (const m of c.voters) {
    if (c.healthyIds.has(m.id)) continue;
    const node = c.nodeOf(m)!;
    const why = statusError(s, node.name);
    if (s.intent.replaceDead?.includes(node.name)) {
      if (!canSafelyRemoveMember(c.voters, c.healthyIds, m.id)) {
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
        via: c.via(node.name),
        reason: `${node.name} was declared dead: its unhealthy member goes first (remove-first, as etcd advises for a failed member), then the node is destroyed and replaced`,
      };
    }
    if (isJoining(c, node.name)) {
      const key = `join:${node.name}` as const;
      if (s.expired.includes(key))
        return failNewNode(
          c,
          node.name,
          m.id,
          `new node ${node.name} did not become a healthy, caught-up voter within the join deadline (${why})`,
        );
      return {
        kind: "wait",
        key,
        node: node.name,
        reason: `waiting for ${node.name} to become a healthy, caught-up voter (${why})`,
      };
    }
    const key = `health:${node.name}` as const;
    if (s.expired.includes(key)) {
      return {
        kind: "refuse",
        condition: "EtcdMemberHealthy",
        reason: `etcd member of ${node.name} is not healthy (${why}); no node was changed. Recover it, or replace it remove-first with \`molt rollout --stack ${c.stack} --replace-dead ${node.name}\` (README "Recovering a dead member")`,
      };
    }
    return { kind: "wait", key, node: node.name, reason: `etcd member of ${node.name} is not healthy yet (${why})` };
  }
  return undefined;
}

function leader(c: Scope): Operation | undefined {
  if (c.leaderId) return undefined;
  if (c.s.expired.includes("leader"))
    return { kind: "refuse", condition: "EtcdClusterHealthy", reason: "the etcd members do not agree on a leader" };
  return { kind: "wait", key: "leader", reason: "waiting for the etcd members to agree on a leader" };
}

/**
 * Kubernetes: every node's API server, controller-manager, scheduler and Node must be
 * healthy too (the victim's may already be going: it is cordoned and being retired), and no
 * control-plane Node of this stack's naming may be left without a machine.
 */
function kubernetesHealth(c: Scope): Operation | undefined {
  const { s } = c;
  if (s.intent.kubernetesVersion === undefined) return undefined;
  if (!s.kube) {
    if (s.expired.includes("kube"))
      return {
        kind: "refuse",
        condition: "KubernetesAPIReachable",
        reason: `the Kubernetes API cannot be observed: ${s.kubeError ?? "unknown"}`,
      };
    return { kind: "wait", key: "kube", reason: `waiting for the Kubernetes API: ${s.kubeError ?? "unknown"}` };
  }
  const kube = s.kube;
  for (const n of c.byAge) {
    const problem = kubeProblem(s, n.name);
    if (!problem) continue;
    if (n.name === c.victim?.name && kube.nodes.find((k) => k.name === n.name)?.unschedulable) continue;
    if (isJoining(c, n.name)) {
      const key = `join:${n.name}` as const;
      if (s.expired.includes(key))
        return failNewNode(
          c,
          n.name,
          c.memberOf(n)?.id,
          `new node ${n.name}'s control plane did not become healthy within the join deadline (${problem})`,
        );
      return { kind: "wait", key, node: n.name, reason: `waiting for ${n.name}'s control plane (${problem})` };
    }
    const key = `health:${n.name}` as const;
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
  for (const k of kube.nodes) {
    if (!k.controlPlane || !hasNodeNamePrefix(c.stack, k.name) || s.nodes.some((n) => n.name === k.name)) continue;
    if (k.leaseAgeSeconds === undefined || k.leaseAgeSeconds > STALE_LEASE_SECONDS)
      return {
        kind: "delete-node",
        node: k.name,
        via: kube.via,
        reason: `Node ${k.name} belongs to no node of the stack (its machine is gone)`,
      };
    const key = `stale-node:${k.name}` as const;
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
  return undefined;
}

/**
 * Everything is healthy from here on: retire the victim, one step per pass. Whether its
 * member may go at all is decided before the node is touched (drained, its API server
 * stopped): a retirement that would be refused changes nothing.
 */
function retire(c: Scope): Operation | undefined {
  const { s, victim } = c;
  if (!victim) return undefined;
  const member = c.memberOf(victim)!;
  if (!canSafelyRemoveMember(c.voters, c.healthyIds, member.id)) {
    return {
      kind: "refuse",
      condition: "EtcdClusterHealthy",
      reason: `removing ${victim.name} would leave fewer healthy voters than quorum`,
    };
  }
  const leads = member.id === c.leaderId;
  // Leadership goes to the newest up-to-date healthy voter (Cluster API: the newest machine).
  const leaderTarget = leads
    ? s.nodes
        .filter((n) => n.name !== victim.name)
        .sort(
          (a, b) => Number(isOutdated(a, s.intent)) - Number(isOutdated(b, s.intent)) || b.generation - a.generation,
        )
        .map((n) => ({ n, m: c.memberOf(n) }))
        .find(({ m }) => m && c.healthyIds.has(m.id) && !m.isLearner)
    : undefined;
  if (leads && !leaderTarget)
    return {
      kind: "refuse",
      condition: "EtcdClusterHealthy",
      reason: `no healthy voter to move leadership to from ${victim.name}`,
    };
  if (s.intent.kubernetesVersion !== undefined && s.kube) {
    const k = s.kube.nodes.find((n) => n.name === victim.name);
    const evictable = s.kube.evictable[victim.name] ?? 0;
    if (k && (!k.unschedulable || evictable > 0)) {
      return {
        kind: "drain",
        node: victim.name,
        via: s.kube.via,
        reason: `retire ${victim.name}: cordon and drain it first (${evictable} pod(s) to evict, PodDisruptionBudgets honoured)`,
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
  const why = c.tooMany
    ? isOutdated(victim, s.intent)
      ? "outdated"
      : "surplus"
    : "outdated; maxSurge 0: retire first";
  return {
    kind: "remove-member",
    node: victim.name,
    memberId: member.id,
    via: c.via(victim.name),
    reason: `retire ${victim.name} (${why}): remove its etcd member, then destroy it`,
  };
}

/** Fewer nodes than replicas, or outdated nodes (add first): version rules, kubeadm-config, then a surge. */
function grow(c: Scope): Operation | undefined {
  const { s } = c;
  const { intent } = s;
  if (s.nodes.length >= intent.replicas && c.outdated.length === 0) return undefined;
  // etcd's rules first: a refusal must come before any change.
  const etcdProblem = etcdVersionProblem(
    Object.values(s.etcd!.status).flatMap((r) => (r.ok ? [r.status.version] : [])),
    intent.etcdVersion,
  );
  if (etcdProblem) return { kind: "refuse", condition: "EtcdVersionSkew", reason: etcdProblem };
  // kubeadm join reads the cluster's configuration: it names the version being rolled to
  // before the first node of that version joins (Cluster API does the same).
  const cc = s.kube?.clusterConfigVersion;
  if (intent.kubernetesVersion !== undefined && s.kube && cc !== undefined && cc !== intent.kubernetesVersion) {
    return {
      kind: "update-cluster-config",
      version: intent.kubernetesVersion,
      via: s.kube.via,
      reason: `kubeadm-config says ${cc}; set it to ${intent.kubernetesVersion} before ${intent.kubernetesVersion} nodes join`,
    };
  }
  const entry = newEntry(s, c.stack, false);
  const reason =
    s.nodes.length < intent.replicas
      ? `${s.nodes.length}/${intent.replicas} nodes: add ${entry.name}`
      : `${c.outdated.length} outdated node(s) (${c.outdated.map((n) => n.name).join(", ")}): add ${entry.name} first`;
  return { kind: "surge", entry, reason };
}

/** After the last node: kubeadm-config, kube-proxy and CoreDNS follow the version. */
function addons(c: Scope): Operation | undefined {
  const { s } = c;
  const target = s.intent.kubernetesVersion;
  if (target === undefined || !s.kube) return undefined;
  const cc = s.kube.clusterConfigVersion;
  if (cc !== undefined && cc !== target) {
    return {
      kind: "update-cluster-config",
      version: target,
      via: s.kube.via,
      reason: `every node runs ${target} but kubeadm-config says ${cc}`,
    };
  }
  const proxy = s.kube.kubeProxy;
  if (proxy && proxy.version !== target) {
    return {
      kind: "update-addons",
      version: target,
      via: s.kube.via,
      kubeadmNode: c.newest.name,
      reason: `every control-plane node runs ${target}: update kube-proxy (${proxy.version}) and CoreDNS to its versions`,
    };
  }
  if (proxy && !proxy.rolledOut) {
    if (s.expired.includes("addons"))
      return {
        kind: "refuse",
        condition: "AddonsRolledOut",
        reason:
          "the kube-proxy DaemonSet did not finish rolling out within molt:timeouts.drainSeconds; every control-plane " +
          "node already runs the target version. Check its pods, then run molt again to wait for it",
      };
    return { kind: "wait", key: "addons", reason: "waiting for the kube-proxy DaemonSet to roll out" };
  }
  return undefined;
}

/**
 * Is `node` a new node not yet seen healthy: the one this run added, or (after a run that
 * ended before its new node became healthy) the newest, up-to-date node of a surge still
 * in progress (more nodes than replicas)?
 */
function isJoining(c: Scope, node: string): boolean {
  const { s } = c;
  if (node !== c.newest.name || s.nodes.length <= 1) return false;
  if (node === s.joining) return true;
  return s.nodes.length > s.intent.replicas && !isOutdated(c.newest, s.intent) && c.outdated.length > 0;
}

function failNewNode(c: Scope, node: string, memberId: string | undefined, reason: string): Operation {
  if (c.s.intent.rollout.onFailure === "pause")
    return { kind: "pause", node, reason: `${reason}; left in place for inspection (--on-failure pause)` };
  // The member is removed through another node that answers.
  const via = c.s.nodes.find((n) => n.name !== node && c.s.etcd?.status[n.name]?.ok)?.name;
  return {
    kind: "rollback",
    node,
    ...(memberId ? { memberId } : {}),
    ...(memberId && via ? { via } : {}),
    reason: `${reason}; rolling it back`,
  };
}
