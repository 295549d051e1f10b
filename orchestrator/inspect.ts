// Read-only views of a stack for `plan` and `status`: one observation (the loop's own),
// no lock, no change.
import type { EdgeFactory } from "./edges/open";
import type { NodeView } from "./events";
import type { ClusterVersionResult, Operation, World } from "./core/model";
import { observe } from "./observe";
import {
  agreedLeader,
  chainOf,
  decide,
  isOutdated,
  kubeProblem,
  plannedReplacements,
  replacementsNow,
  versionOf,
  type PlannedReplacement,
} from "./core/plan";
import type { ChainStep } from "./core/plan";
import { nodeViews } from "./views";
import { hexMemberId } from "./etcd-id";
import { releaseStatus, type ReleaseStatus } from "./promotion/status";
import { describeOwner, sameOwner, type Ownership } from "./core/ownership";
import { openRun, stackExists } from "./run/context";

export interface Condition {
  type:
    | "EtcdClusterHealthy"
    | "EtcdMembersMatchNodes"
    | "MachinesUpToDate"
    | "ControlPlaneHealthy"
    | "ClusterOwned"
    | "Available";
  status: "True" | "False" | "Unknown";
  reason: string;
}

export interface Inspection {
  stack: string;
  exists: boolean;
  intent: { provider: string; replicas: number; image: string; kubernetesVersion?: string; maxSurge: number };
  nodes: NodeView[];
  members: { id: string; name: string; learner: boolean; peerURLs: string[] }[];
  leader?: string;
  alarms: string[];
  conditions: Condition[];
  next: Operation;
  replacements: PlannedReplacement[];
  /** molt:release and its verification record (orchestrator/promotion/). */
  release?: ReleaseStatus;
  /** How far a roll is: nodes up to date of replicas, and the outdated ones left. */
  progress: { upToDate: number; replicas: number; outdated: string[] };
  /** molt:rollout.replaceCertificatesExpiringWithinDays: each node's first certificate to expire. */
  certificates?: World["certificates"];
  /** A chained upgrade under way (molt:images, core/plan/chain.ts): its steps and where the cluster is. */
  chain?: ChainView;
  /**
   * etcd's cluster version as a voter's /version reports it: a version ("3.7.0"), or
   * "not_decided" (right after a cluster starts). Only that: a read that failed leaves it out
   * and says why in etcdClusterVersionError.
   */
  etcdClusterVersion?: string;
  /** Why etcd's cluster version could not be read (no voter's /version answered); absent when it was. */
  etcdClusterVersionError?: string;
}

export interface ChainView {
  steps: (ChainStep & { replacements: number })[];
  /** The step being rolled, or next to roll (an index into steps). */
  current: number;
}

export async function inspect(o: {
  stack: string;
  workDir?: string;
  env?: Record<string, string>;
  edges?: EdgeFactory;
}): Promise<Inspection> {
  const run = await openRun({ ...o, readOnly: true });
  const { cfg, backend } = run;
  const intent = cfg.intent;
  let snapshot: World;
  let exists: boolean;
  try {
    const edges = await run.open();
    exists = stackExists(edges);
    snapshot = await observe(edges, intent, { expired: [] }, run.self);
  } finally {
    await run.close();
  }
  const stored = { nodes: snapshot.nodes };
  const views = nodeViews(snapshot);
  const leader = snapshot.etcd ? agreedLeader(snapshot) : undefined;
  const next = decide(snapshot, o.stack);
  const members = snapshot.etcd?.members ?? [];
  const memberNames = new Set(members.map((m) => m.name));
  const unhealthy = views.filter((v) => !v.member?.healthy).map((v) => v.name);
  // Learners are not voters. A learner, an unstarted member (added, never joined: no name)
  // or a member no node owns (a stray) means the cluster is not at rest: not healthy.
  const voters = members.filter((m) => !m.isLearner);
  const odd = members
    .filter((m) => m.isLearner || !m.name || !stored.nodes.some((n) => n.name === m.name))
    .map((m) => {
      const what = [
        m.isLearner ? "learner" : "voter",
        m.name ? "" : "unstarted",
        stored.nodes.some((n) => n.name === m.name) ? "" : "no node",
      ];
      return `${hexMemberId(m.id)} (${what.filter(Boolean).join(", ")})`;
    });
  const cv = snapshot.etcd?.clusterVersion;
  const clusterVersion = cv ? (cv.ok ? cv.version : `unreadable (${cv.error})`) : undefined;
  const clusterVersionFields = cv ? etcdClusterVersionFields(cv) : {};
  const conditions: Condition[] = [
    snapshot.etcd
      ? unhealthy.length === 0 && odd.length === 0 && leader && snapshot.etcd.alarms.length === 0
        ? {
            type: "EtcdClusterHealthy",
            status: "True",
            reason:
              `${voters.length} voting members, leader agreed, no alarms` +
              (clusterVersion ? `, cluster version ${clusterVersion}` : ""),
          }
        : {
            type: "EtcdClusterHealthy",
            status: "False",
            reason: [
              `${voters.length} voting member(s)`,
              odd.length ? `member(s) not at rest: ${odd.join(", ")}` : "",
              unhealthy.length ? `not healthy: ${unhealthy.join(", ")}` : "",
              leader ? "" : "no agreed leader",
              snapshot.etcd.alarms.length ? `alarms: ${snapshot.etcd.alarms.map((a) => a.alarm).join(",")}` : "",
            ]
              .filter(Boolean)
              .join("; "),
          }
      : {
          type: "EtcdClusterHealthy",
          status: stored.nodes.length ? "False" : "Unknown",
          reason: snapshot.etcdError ?? "no nodes",
        },
    snapshot.etcd
      ? members.length === stored.nodes.length && stored.nodes.every((n) => memberNames.has(n.name))
        ? { type: "EtcdMembersMatchNodes", status: "True", reason: "every node has exactly one member" }
        : {
            type: "EtcdMembersMatchNodes",
            status: "False",
            reason:
              `members [${members.map((m) => m.name || `${hexMemberId(m.id)} (unstarted)`)}] vs nodes ` +
              `[${stored.nodes.map((n) => n.name)}]`,
          }
      : { type: "EtcdMembersMatchNodes", status: "Unknown", reason: "etcd not observed" },
    stored.nodes.some((n) => isOutdated(n, intent, snapshot.certificates))
      ? {
          type: "MachinesUpToDate",
          status: "False",
          reason: `outdated: ${stored.nodes
            .filter((n) => isOutdated(n, intent, snapshot.certificates))
            .map((n) => `${n.name} (${n.image})`)
            .join(", ")}`,
        }
      : {
          type: "MachinesUpToDate",
          status: stored.nodes.length ? "True" : "Unknown",
          reason: stored.nodes.length ? `all on ${intent.image}` : "no nodes",
        },
    ...(intent.kubernetesVersion !== undefined ? [kubeCondition(snapshot)] : []),
    ...(stored.nodes.length ? [ownedCondition(snapshot.ownership)] : []),
    next.kind === "done"
      ? { type: "Available", status: "True", reason: next.reason }
      : { type: "Available", status: snapshot.etcd ? "True" : "False", reason: `next: ${next.kind}: ${next.reason}` },
  ];
  return {
    stack: o.stack,
    exists,
    intent: {
      provider: intent.provider,
      replicas: intent.replicas,
      image: intent.image,
      ...(intent.kubernetesVersion ? { kubernetesVersion: intent.kubernetesVersion } : {}),
      maxSurge: intent.rollout.maxSurge,
    },
    nodes: views,
    members: members.map((m) => ({ id: m.id, name: m.name, learner: m.isLearner, peerURLs: m.peerURLs })),
    ...(leader ? { leader } : {}),
    alarms: (snapshot.etcd?.alarms ?? []).map((a) => `${a.alarm}@${hexMemberId(a.memberId)}`),
    conditions,
    next,
    ...(cfg.release ? { release: await releaseStatus(cfg, o.stack, backend, run.store) } : {}),
    replacements: replacementsNow(snapshot),
    ...(snapshot.certificates ? { certificates: snapshot.certificates } : {}),
    progress: rolloutProgress(snapshot, intent),
    ...chainView(snapshot, intent),
    ...clusterVersionFields,
  };
}

/**
 * etcd's cluster version for the JSON: etcdClusterVersion holds only what etcd decided (a
 * version, or "not_decided"), a failed read or an answer that is neither goes to
 * etcdClusterVersionError; the EtcdClusterHealthy line says either in words.
 */
export function etcdClusterVersionFields(
  cv: ClusterVersionResult,
): Pick<Inspection, "etcdClusterVersion" | "etcdClusterVersionError"> {
  if (!cv.ok) return { etcdClusterVersionError: cv.error };
  if (cv.version === "not_decided" || versionOf(cv.version)) return { etcdClusterVersion: cv.version };
  return {
    etcdClusterVersionError: `etcd /version (via ${cv.via}) answered cluster version "${cv.version}", not a version`,
  };
}

/** The chain as `plan` and `status` show it: per step, how many nodes it replaces. */
function chainView(s: World, intent: World["intent"]): { chain?: ChainView } {
  const r = chainOf(s.nodes, intent);
  if (r.kind !== "chain") return {};
  const { chain } = r;
  const count = (i: number) => {
    if (i < chain.current)
      return chain.settle && chain.steps[i] === chain.settle.step
        ? plannedReplacements(s.nodes, chain.settle.intent, s.certificates).length
        : 0;
    if (i === chain.current) return plannedReplacements(s.nodes, chain.intent, s.certificates).length;
    return intent.replicas;
  };
  return { chain: { steps: chain.steps.map((st, i) => ({ ...st, replacements: count(i) })), current: chain.current } };
}

function kubeCondition(s: World): Condition {
  if (!s.kube)
    return {
      type: "ControlPlaneHealthy",
      status: s.nodes.length ? "False" : "Unknown",
      reason: s.kubeError ?? "no nodes",
    };
  const bad = s.nodes.map((n) => [n.name, kubeProblem(s, n.name)] as const).filter(([, p]) => p !== undefined);
  if (bad.length === 0) {
    const versions = [...new Set(Object.values(s.kube.components).map((c) => c.apiserver.version))].join(", ");
    return {
      type: "ControlPlaneHealthy",
      status: "True",
      reason:
        `every API server ready (${versions}), controller-managers, schedulers and Nodes healthy; ` +
        `kubeadm-config ${s.kube.clusterConfigVersion ?? "?"}`,
    };
  }
  return { type: "ControlPlaneHealthy", status: "False", reason: bad.map(([n, p]) => `${n}: ${p}`).join("; ") };
}

function rolloutProgress(s: World, intent: World["intent"]): Inspection["progress"] {
  const outdated = s.nodes.filter((n) => isOutdated(n, intent, s.certificates)).map((n) => n.name);
  return { upToDate: s.nodes.length - outdated.length, replicas: intent.replicas, outdated };
}

/** Whether this stack owns the cluster (core/ownership.ts): its marker in the cluster's etcd. */
function ownedCondition(o: Ownership | undefined): Condition {
  const type = "ClusterOwned";
  if (!o) return { type, status: "Unknown", reason: "etcd not observed" };
  const m = o.marker;
  switch (m.kind) {
    case "unobserved":
      return { type, status: "Unknown", reason: `the ownership marker could not be read: ${m.error}` };
    case "absent":
      return { type, status: "False", reason: "no ownership marker: the next rollout claims the cluster" };
    case "invalid":
      return { type, status: "False", reason: `the ownership marker is not one molt writes: ${m.why}` };
    case "claimed":
      return {
        type,
        status: sameOwner(m.marker, o.self) ? "True" : "False",
        reason: `${describeOwner(m.marker)}, claimed by molt ${m.marker.by} at ${m.marker.claimedAt}`,
      };
  }
}
