// The planner's changes once everything is healthy: retire one node (drain, stop its API
// server, move leadership, remove its member), or grow (kubeadm-config first, then a surge).
import type { HostFileCarry, Operation } from "../model";
import { canSafelyRemoveMember, isOutdated, newEntry } from "./rules";
import type { Scope } from "./scope";
import { etcdVersionProblem } from "./versions";
import { vipRelease } from "./vip";
import { targetRelease } from "./endpoint";
import { etcdUpgradePatchProblem } from "./etcd-upgrade";
import { drainReason, needsDrain } from "../drain";
import { clusterVersionBeforeJoin } from "./cluster-version";

/**
 * Everything is healthy from here on: retire the victim, one step per pass. Whether its
 * member may go at all is decided before the node is touched (drained, its API server
 * stopped): a retirement that would be refused changes nothing.
 */
export function retire(c: Scope): Operation | undefined {
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
          (a, b) =>
            Number(isOutdated(a, s.intent, s.certificates)) - Number(isOutdated(b, s.intent, s.certificates)) ||
            b.generation - a.generation,
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
  // The VIP leaves the node before it is drained, its API server stopped or its member removed.
  const release = vipRelease(s, victim.name);
  if (release) return release;
  const k = s.intent.kubernetesVersion !== undefined ? s.kube?.nodes.find((n) => n.name === victim.name) : undefined;
  if (k && s.kube) {
    const evictable = s.kube.evictable[victim.name] ?? 0;
    if (needsDrain(k, evictable))
      return { kind: "drain", node: victim.name, via: s.kube.via, reason: drainReason(victim.name, evictable) };
  }
  // The API load balancer lets it go before anything stops serving (plan/endpoint.ts).
  const leave = targetRelease(s, victim.name);
  if (leave) return leave;
  // Its API server goes before its etcd member: stopped gracefully, it fails /readyz
  // while still serving for its shutdown delay, so no request reaches an API server whose
  // etcd is gone (behind a load balancer molt observes, it is out of rotation already).
  if (k && s.kube?.components[victim.name]?.apiserver.ok) {
    return {
      kind: "stop-apiserver",
      node: victim.name,
      reason:
        `retire ${victim.name}: stop its kube-apiserver gracefully, out of the load balancer, before its ` +
        `etcd member is removed`,
    };
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
    ? isOutdated(victim, s.intent, s.certificates)
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
export function grow(c: Scope): Operation | undefined {
  const { s } = c;
  const { intent } = s;
  if (s.nodes.length >= intent.replicas && c.outdated.length === 0) return undefined;
  // etcd's rules first: a refusal must come before any change.
  const etcdProblem = etcdVersionProblem(
    Object.values(s.etcd!.status).flatMap((r) => (r.ok ? [r.status.version] : [])),
    intent.etcdVersion,
  );
  if (etcdProblem) return { kind: "refuse", condition: "EtcdVersionSkew", reason: etcdProblem };
  const patchProblem = etcdUpgradePatchProblem(
    Object.entries(s.etcd!.status).flatMap(([name, r]) => (r.ok ? [{ name, version: r.status.version }] : [])),
    intent.etcdVersion,
  );
  if (patchProblem) return { kind: "refuse", condition: "EtcdUpgradePatch", reason: patchProblem };
  // etcd's cluster version lags its members: a newer minor joins once the leader has raised it.
  const lagging = clusterVersionBeforeJoin(c, intent.etcdVersion);
  if (lagging) return lagging;
  // kubeadm join reads the cluster's configuration: it names the version being rolled to
  // before the first node of that version joins (Cluster API does the same).
  const cc = s.kube?.clusterConfigVersion;
  if (intent.kubernetesVersion !== undefined && s.kube && cc !== undefined && cc !== intent.kubernetesVersion) {
    return {
      kind: "update-cluster-config",
      version: intent.kubernetesVersion,
      via: s.kube.via,
      reason:
        `kubeadm-config says ${cc}; set it to ${intent.kubernetesVersion} before ${intent.kubernetesVersion} ` +
        `nodes join`,
    };
  }
  const carry = hostFileCarry(c);
  if (carry && "refuse" in carry) return carry.refuse;
  const entry = newEntry(s, c.stack, false);
  const reason =
    s.nodes.length < intent.replicas
      ? `${s.nodes.length}/${intent.replicas} nodes: add ${entry.name}`
      : `${c.outdated.length} outdated node(s) (${c.outdated.map((n) => n.name).join(", ")}): add ${entry.name} first`;
  return { kind: "surge", entry, reason, ...(carry ? { hostFiles: carry } : {}) };
}

/**
 * The host files kubeadm-config references (KubeOne's encryption key, audit policy,
 * admission configuration...) come to a new node from a healthy voter that holds them all,
 * the oldest first (the node it joins through, when it can). None holds them all: refused
 * before any change, with what each node lacks.
 */
export function hostFileCarry(c: Scope): HostFileCarry | { refuse: Operation } | undefined {
  const h = c.s.hostFiles;
  if (!h?.files.length) return undefined;
  const healthy = c.s.nodes.filter((n) => c.healthyIds.has(c.memberOf(n)?.id ?? ""));
  const from = healthy.find((n) => {
    const l = h.lacking[n.name];
    return Array.isArray(l) && l.length === 0;
  });
  if (from) return { from: from.name, files: h.files };
  const told = c.s.nodes.map((n) => {
    const l = h.lacking[n.name];
    if (l === undefined) return `${n.name}: not asked`;
    if (!Array.isArray(l)) return `${n.name}: ${l.error}`;
    return l.length ? `${n.name} lacks ${l.join(", ")}` : `${n.name} is not a healthy voter`;
  });
  return {
    refuse: {
      kind: "refuse",
      condition: "ClusterHostFiles",
      reason:
        `kubeadm-config references host files that a new node must get before it joins ` +
        `(${h.files.map((f) => `${f.path} from ${f.why}`).join("; ")}), and no healthy control-plane node holds ` +
        `them all (${told.join("; ")}): restore them on the nodes (every control-plane node needs them) or ` +
        `remove the reference from kubeadm-config; nothing was changed`,
    },
  };
}
