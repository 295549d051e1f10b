// etcd's cluster version: the version the cluster as a whole speaks, which etcd's leader
// raises on its own (every few seconds it asks each member's /version and sets the lowest
// server minor it finds) once every member runs a newer minor. It lags the members: right
// after the last member of the older minor is gone it still reads the older one. etcd is
// upgraded one minor at a time (its upgrade guides; etcd itself checks only MinClusterVersion,
// 3.0.0): molt's policy is that a member more than one minor above it waits, so a chained
// upgrade's next etcd minor joins a cluster that speaks the previous one, and a rollout that
// changed the etcd minor is converged only once it has moved.
import type { ClusterVersionResult, Operation, WaitKey } from "../model";
import type { Scope } from "./scope";
import { compareMinors, minorName as name, minorOf, type Version } from "./versions";

const below = (a: Version, b: Version) => compareMinors(a, b) < 0;

export const CLUSTER_VERSION_WAIT: WaitKey = "etcd-cluster-version";

/** Why etcd's cluster version is behind its members, or undefined when it is not (or cannot be judged). */
export interface ClusterVersionLag {
  /** The lowest minor the members run: what the cluster version reaches on its own. */
  members: string;
  /** What the cluster version read (or why it could not be read). */
  seen: string;
}

/**
 * Whether the cluster version has reached the lowest minor every member runs. Undefined: it has
 * (or no member's version is known). A cluster version that cannot be read, or that etcd has
 * not decided yet ("not_decided" right after a cluster starts), lags.
 */
export function clusterVersionLag(
  members: { name: string; version: string }[],
  cluster: ClusterVersionResult,
): ClusterVersionLag | undefined {
  const minors = members.map((m) => minorOf(m.version)).filter((m): m is Version => m !== undefined);
  if (minors.length === 0) return undefined;
  const lowest = minors.reduce((a, b) => (below(b, a) ? b : a));
  // Unreadable (e.g. etcd serves HTTP on --listen-client-http-urls only): nothing to judge by,
  // so nothing waits on it; the member versions' own rule (versions.ts) still holds.
  if (!cluster.ok) return undefined;
  const c = minorOf(cluster.version);
  if (!c) return { members: name(lowest), seen: `"${cluster.version}" (not decided yet)` };
  return below(c, lowest) ? { members: name(lowest), seen: cluster.version } : undefined;
}

/**
 * Whether a new member of etcd `joining` must wait for the cluster version: it runs a newer
 * minor than the cluster version reads, and the cluster version has not yet reached the minor
 * every member runs (it will on its own). Undefined: proceed (no lag, no etcd version known
 * for the new node, or it runs no newer minor than the cluster version).
 */
export function joinWaitsForClusterVersion(
  members: { name: string; version: string }[],
  cluster: ClusterVersionResult,
  joining: string | undefined,
): ClusterVersionLag | undefined {
  const j = minorOf(joining);
  if (!j) return undefined;
  const lag = clusterVersionLag(members, cluster);
  if (!lag) return undefined;
  const c = cluster.ok ? minorOf(cluster.version) : undefined;
  // Unread or undecided: a new member of a newer minor than every member runs is not let in
  // blind; one of the members' own minor joins as it would anyway.
  if (!c) return below(minorOf(lag.members)!, j) ? lag : undefined;
  // etcd is upgraded one minor at a time: a member one minor above the cluster version joins
  // (the normal step), only one further ahead waits for the leader to raise it.
  return below({ major: c.major, minor: c.minor + 1 }, j) ? lag : undefined;
}

/** The members' versions as this pass read them (members whose status answered). */
function memberVersions(c: Scope): { name: string; version: string }[] {
  return Object.entries(c.s.etcd?.status ?? {}).flatMap(([name, r]) =>
    r.ok ? [{ name, version: r.status.version }] : [],
  );
}

function describe(members: { name: string; version: string }[]): string {
  return members.map((m) => `${m.name} ${m.version}`).join(", ");
}

/** The wait, or at its deadline the refusal, for a lagging cluster version. */
function waitOrRefuse(c: Scope, lag: ClusterVersionLag, before: string, done: string): Operation {
  const members = memberVersions(c);
  if (c.s.expired.includes(CLUSTER_VERSION_WAIT))
    return {
      kind: "refuse",
      condition: "EtcdClusterVersion",
      reason:
        `etcd's cluster version is ${lag.seen} and did not reach ${lag.members}, the minor every member runs ` +
        `(${describe(members)}), within the settle deadline (${c.s.intent.timeouts.settleSeconds}s); ` +
        `${before} waits for it; ${done}. etcd's leader raises it on its own once it has ` +
        `read every member's /version: check that every member answers on its peer URL (the leader's log says ` +
        `which it could not ask) and that no downgrade is enabled (\`etcdctl downgrade cancel\`), then run molt ` +
        `again`,
    };
  return {
    kind: "wait",
    key: CLUSTER_VERSION_WAIT,
    reason:
      `etcd's cluster version is ${lag.seen}, every member runs ${lag.members} (${describe(members)}): waiting ` +
      `for etcd's leader to raise it before ${before}`,
  };
}

/** Before a member of a newer etcd minor than the cluster version joins (plan/change-steps.ts grow). */
export function clusterVersionBeforeJoin(c: Scope, joining: string | undefined): Operation | undefined {
  const cluster = c.s.etcd?.clusterVersion;
  if (!cluster) return undefined;
  const lag = joinWaitsForClusterVersion(memberVersions(c), cluster, joining);
  return lag ? waitOrRefuse(c, lag, `a node of etcd ${joining} joins`, "nothing else was changed") : undefined;
}

/**
 * Before the rollout (in a chain: its step) is done: etcd's cluster version has reached the
 * minor every member runs, so the next rollout or step starts from a cluster that speaks it.
 */
export function clusterVersionSettled(c: Scope): Operation | undefined {
  const cluster = c.s.etcd?.clusterVersion;
  if (!cluster) return undefined;
  const lag = clusterVersionLag(memberVersions(c), cluster);
  return lag
    ? waitOrRefuse(
        c,
        lag,
        `the roll to ${c.s.intent.image} is done`,
        "every node already runs it, only this last check is left",
      )
    : undefined;
}
