// The planner's scope: the queries every rule asks of one observed world, computed once
// per decision (Cluster API's ControlPlane scope object plays the same role).
import type { Member, NodeEntry, World } from "../model";
import { agreedLeader, isHealthyVoter, isOutdated, memberOfNode, selectNodeForRetirement } from "./rules";

export interface Scope {
  s: World;
  stack: string;
  members: Member[];
  voters: Member[];
  leaderId?: string;
  /** Voters whose node answers as a healthy, caught-up voter. */
  healthyIds: Set<string>;
  memberOf(node: NodeEntry): Member | undefined;
  nodeOf(member: Member): NodeEntry | undefined;
  /** Nodes oldest first. */
  byAge: NodeEntry[];
  newest: NodeEntry;
  outdated: NodeEntry[];
  /** More nodes than replicas: one must go before anything is added. */
  tooMany: boolean;
  /** The node to retire now (surplus, or maxSurge 0 with outdated nodes), if any. */
  victim?: NodeEntry;
  /** The first healthy voter other than `exclude` (where membership calls go), else the leader's node. */
  via(exclude?: string): string;
}

export function scopeOf(s: World, stack: string): Scope {
  const members = s.etcd?.members ?? [];
  const addressOf = (name: string) => s.endpoints.find((e) => e.name === name)?.privateAddress;
  const memberOf = (n: NodeEntry) => memberOfNode(members, n, addressOf(n.name));
  const nodeOf = (m: Member) => s.nodes.find((n) => memberOfNode([m], n, addressOf(n.name)));
  const leaderId = s.etcd ? agreedLeader(s) : undefined;
  const voters = members.filter((m) => !m.isLearner);
  const healthyIds = new Set(
    voters
      .filter((m) => {
        const n = nodeOf(m);
        return n !== undefined && isHealthyVoter(s, n.name, leaderId);
      })
      .map((m) => m.id),
  );
  const byAge = [...s.nodes].sort((a, b) => a.generation - b.generation);
  const outdated = s.nodes.filter((n) => isOutdated(n, s.intent, s.certificates));
  const tooMany = s.nodes.length > s.intent.replicas;
  const retireFirst = outdated.length > 0 && s.nodes.length === s.intent.replicas && s.intent.rollout.maxSurge === 0;
  const victim = tooMany || retireFirst ? selectNodeForRetirement(s.nodes, s.intent, s.certificates) : undefined;
  const via = (exclude?: string) => {
    const healthy = s.nodes.find((n) => n.name !== exclude && healthyIds.has(memberOf(n)?.id ?? ""));
    const leader = s.nodes.find((n) => memberOf(n)?.id === leaderId);
    return (healthy ?? leader ?? s.nodes[0]).name;
  };
  return {
    s,
    stack,
    members,
    voters,
    leaderId,
    healthyIds,
    memberOf,
    nodeOf,
    byAge,
    newest: byAge[byAge.length - 1],
    outdated,
    tooMany,
    victim,
    via,
  };
}
