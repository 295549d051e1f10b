// The planner's etcd steps: membership must match the nodes, every voter must be healthy,
// learners are promoted once caught up, and the members must agree on a leader.
import type { Operation } from "../model";
import { failNewNode, isJoining } from "./new-node";
import { canSafelyRemoveMember, isUnreachable, leaderApplied, statusError, statusOf } from "./rules";
import type { Scope } from "./scope";
import { targetRemoval } from "./removal";
import { KEEPALIVED_CONF_PATH } from "../keepalived-conf";
import { adoptedWipe } from "../host-files";

/** Declared dead by the operator: only ever an unhealthy member (a healthy one is replaced add-first). */
export function replaceDeadGuard(c: Scope): Operation | undefined {
  for (const name of c.s.intent.replaceDead ?? []) {
    const n = c.s.nodes.find((x) => x.name === name);
    const m = n && c.memberOf(n);
    if (m && !m.isLearner && c.healthyIds.has(m.id)) {
      return {
        kind: "refuse",
        condition: "EtcdMemberHealthy",
        reason:
          `--replace-dead ${name}: its etcd member is healthy; nothing was changed. A healthy node is ` +
          `replaced add-first by a rollout without --replace-dead`,
      };
    }
  }
  return undefined;
}

/**
 * Stray members (no node): removed one per pass, first, so a replacement can be added
 * (etcd 3.4 refuses adds while a voter is down), and only with quorum kept.
 */
export function strayMember(c: Scope): Operation | undefined {
  const stray = c.members.find((m) => c.nodeOf(m) === undefined);
  if (!stray) return undefined;
  if (!stray.isLearner && !canSafelyRemoveMember(c.voters, c.healthyIds, stray.id)) {
    return {
      kind: "refuse",
      condition: "EtcdMembersMatchNodes",
      reason:
        `etcd member ${stray.name || stray.id} has no node, and removing it would lose quorum; restore quorum ` +
        `by hand first`,
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
export function memberlessNode(c: Scope): Operation | undefined {
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
  if (memberless.adopted) {
    // The machine stays: nothing of the cluster's may stay on it (the CA keys, the host files
    // such as KubeOne's encryption key). A dead one cannot be wiped: its owner is told.
    const unreachable = isUnreachable(c.s, memberless.name);
    // Of the host files kubeadm-config names, only those under /etc/kubernetes/: the machine is
    // its owner's, and a path elsewhere (or one that climbs out with ..) may be the owner's own.
    const hostFiles = adoptedWipe((c.s.hostFiles?.files ?? []).filter((f) => f.action === "copy").map((f) => f.path));
    const wipe = [
      "/etc/kubernetes/pki",
      ...hostFiles.wipe,
      // Its keepalived (stopped first by retire-adopted) holds the VRRP group's auth_pass.
      ...(memberless.adopted.keepalived ? [KEEPALIVED_CONF_PATH] : []),
    ];
    return {
      kind: "retire-adopted",
      node: memberless.name,
      ...(via && via !== memberless.name ? { deleteNodeVia: via } : {}),
      wipe: [...new Set(wipe)],
      ...(hostFiles.outside.length ? { outside: hostFiles.outside } : {}),
      ...(unreachable ? { unreachable: true } : {}),
      ...(c.s.intent.kubernetesVersion !== undefined && !c.s.kube ? { hostFilesUnknown: true } : {}),
      reason: unreachable
        ? `adopted node ${memberless.name} is no longer an etcd member and does not answer over SSH: release it ` +
          "and delete its Node without its reset; its machine is left to its owner, who must wipe it"
        : `adopted node ${memberless.name} is no longer an etcd member: reset it, wipe the cluster's secrets from ` +
          "it, release it, delete its Node; its machine is left to its owner",
    };
  }
  // A machine molt owns is destroyed without a reset, answering or not (the dead-node path
  // is the only path): it serves nothing any more, and its Node goes after the machine.
  const dead = isUnreachable(c.s, memberless.name);
  // Out of the load balancer first, where its removal or failed join left it registered.
  const leave = targetRemoval(c.s, memberless.name, `${memberless.name} has no etcd member and is to be destroyed`);
  if (leave) return leave;
  return {
    kind: "prune",
    node: memberless.name,
    ...(via && via !== memberless.name ? { deleteNodeVia: via } : {}),
    reason:
      (dead
        ? `${memberless.name} is not an etcd member and does not answer over SSH`
        : `${memberless.name} is not an etcd member (retired, or its join did not happen)`) +
      ": destroy its machine (no reset: it is destroyed)",
  };
}

/** Learners: promote when caught up, otherwise wait within the join deadline. */
export function learners(c: Scope): Operation | undefined {
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
        kind: "promote-learner",
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
export function unhealthyVoters(c: Scope): Operation | undefined {
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
          reason:
            `--replace-dead ${node.name}: removing its member would leave too few healthy voters for quorum; ` +
            `restore quorum first (etcd disaster recovery from a snapshot)`,
        };
      }
      const leave = targetRemoval(s, node.name, `${node.name} was declared dead (--replace-dead)`);
      if (leave) return leave;
      return {
        kind: "remove-member",
        node: node.name,
        memberId: m.id,
        via: c.via(node.name),
        reason:
          `${node.name} was declared dead: its unhealthy member goes first (remove-first, as etcd advises for ` +
          `a failed member), then the node is destroyed and replaced`,
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
        reason:
          `etcd member of ${node.name} is not healthy (${why}); no node was changed. Recover it, or replace ` +
          `it remove-first with \`molt rollout --stack ${c.stack} --replace-dead ${node.name}\` (docs/operations.md, ` +
          `"Recovering a dead member")`,
      };
    }
    return { kind: "wait", key, node: node.name, reason: `etcd member of ${node.name} is not healthy yet (${why})` };
  }
  return undefined;
}

export function leader(c: Scope): Operation | undefined {
  if (c.leaderId) return undefined;
  if (c.s.expired.includes("leader"))
    return { kind: "refuse", condition: "EtcdClusterHealthy", reason: "the etcd members do not agree on a leader" };
  return { kind: "wait", key: "leader", reason: "waiting for the etcd members to agree on a leader" };
}
