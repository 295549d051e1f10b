// The plain data the planner decides over: the world as observed once per pass, and the
// operation it decides.
import type { HostFile } from "./host-files";
import type { NodeEndpoint, NodeEntry } from "./nodes";
import type {
  Alarm,
  EndpointStatus,
  KubeObservation,
  LoadBalancerObservation,
  Member,
  VipObservation,
} from "./observations";
import type { ClusterOwner, Ownership } from "./ownership";

export type {
  Alarm,
  EndpointStatus,
  KubeObservation,
  LoadBalancerObservation,
  Member,
  NodeEndpoint,
  NodeEntry,
  VipObservation,
};

/** What the user asked for (stacks/Pulumi.<stack>.yaml), validated. */
export interface Intent {
  /** The kind of a provider of infra/providers/registry.ts (checked when the config is loaded). */
  provider: string;
  replicas: number;
  image: string;
  /**
   * Set when the nodes run Kubernetes: the version the intent's nodes run (without "v").
   * Kubernetes gates (API server, components, Node Ready, drain, kubeadm-config, addons)
   * apply exactly when it is set.
   */
  kubernetesVersion?: string;
  /** The etcd version the intent's image carries, when known (lab images say it). */
  etcdVersion?: string;
  /**
   * molt:images: the image of each Kubernetes minor on the way to kubernetesVersion (sorted
   * by minor). A target more than one minor ahead of the cluster is reached in steps, one
   * minor each (plan/chain.ts); absent: a target more than one minor ahead is refused.
   */
  chain?: ChainImage[];
  /**
   * Nodes the operator declared dead (`--replace-dead`): their unhealthy member is removed
   * first (quorum checked), the node destroyed, and a replacement added, remove-first as
   * etcd advises for a failed member. Never applied to a healthy member.
   */
  replaceDead?: string[];
  /**
   * `--take-over STACK`: the cluster's ownership marker names STACK, whose state is gone; this
   * stack takes the cluster over (core/ownership.ts). Must name the current owner exactly.
   */
  takeOver?: string;
  /** The provider's failure domains (zones, fault domains, vSphere hosts/clusters), in config order. */
  failureDomains?: string[];
  /** vSphere molt:vsphere.staticAddresses.pool, expanded: a new node's address comes from it. */
  staticAddressPool?: string[];
  /** molt:apiEndpoint mode vip: the VIP keepalived moves between the nodes (observed and released by molt). */
  vip?: { address: string };
  /**
   * molt:encryptionAtRest: a new cluster encrypts Secrets in etcd (its first node makes the key);
   * an existing cluster without it is refused, not changed (kube-apiserver's flag and every
   * Secret rewritten is a migration of its own).
   */
  encryptionAtRest?: boolean;
  /**
   * kube-apiserver's --shutdown-delay-duration on the nodes molt makes (molt:bootstrap on clouds):
   * a stopping API server serves this long before it stops listening, which stop-apiserver waits for.
   */
  apiServerShutdownDelaySeconds?: number;
  rollout: {
    /** 1: add first (default). 0: retire first, allowed only with >= 3 replicas. */
    maxSurge: 0 | 1;
    onFailure: "rollback" | "pause";
    /** A voter whose applied index trails the leader's by more is not caught up. */
    maxAppliedLag: number;
    /** --max-replacements: this run starts no replacement after this many (result paused). */
    maxReplacements?: number;
    /** A node with a certificate expiring within this many days is outdated (replaced). */
    replaceCertificatesExpiringWithinDays?: number;
    /** molt:rollout.window: when replacements may start (checked by the loop, not the planner). */
    window?: MaintenanceWindow;
    /**
     * molt:rollout.pruneWithNextSurge: a retired node's destruction and the next node's
     * creation in one engine run (`prune-and-surge`), when the planner would decide that
     * surge right after the prune (plan/overlap.ts). One machine more is in flight during it.
     */
    pruneWithNextSurge?: boolean;
  };
  /** Hooks (molt:hooks, library callbacks): which run, and how long each may take. */
  hooks?: Partial<Record<HookName, HookSpec>>;
  timeouts: {
    /** A new node must be a healthy, caught-up voter within this. */
    joinSeconds: number;
    /** How long molt waits for a transient condition (no leader, catching up) before giving up. */
    settleSeconds: number;
    /** Draining a node (evictions, PodDisruptionBudgets) must finish within this. */
    drainSeconds: number;
    /**
     * molt:rollout.soakSeconds: a new node, once healthy, is observed this long before the next
     * retirement (a `soak:` wait whose expiry means it passed).
     */
    soakSeconds?: number;
    /**
     * molt:rollout.stepSoakSeconds: in a chained upgrade, the cluster converged on one step's
     * minor is observed this long before the next step's first node joins (a `step-soak:` wait).
     */
    stepSoakSeconds?: number;
  };
}

/** One minor's image of a chained upgrade (molt:images), with what it carries. */
export interface ChainImage {
  /** "1.36" */
  minor: string;
  image: string;
  /** The full version the image runs ("1.36.3"). */
  kubernetesVersion: string;
  /** The etcd version it carries, when known (lab images say it). */
  etcdVersion?: string;
}

/** Which nodes hold the host files kubeadm-config references (core/host-files.ts). */
export interface HostFilesObservation {
  files: HostFile[];
  /** Per node: the carried files it lacks (empty: it holds them all), or why it could not be asked. */
  lacking: Record<string, string[] | { error: string }>;
}

export type StatusResult =
  | { ok: true; status: EndpointStatus }
  /** `unreachable`: the node's SSH did not answer at all (not only its etcd). */
  | { ok: false; error: string; unreachable?: boolean };

/**
 * etcd's cluster version (its /version `etcdcluster`: "3.6.0", or "not_decided" right after a
 * cluster starts) as the member `via` reports it, or why it could not be read.
 */
export type ClusterVersionResult = { ok: true; version: string; via: string } | { ok: false; error: string };

export interface EtcdObservation {
  members: Member[];
  /** Per node name, the status of that node's local member through its own tunnel. */
  status: Record<string, StatusResult>;
  alarms: Alarm[];
  /**
   * The cluster version (plan/cluster-version.ts), read through the voter that answered the
   * member list; absent where the caller did not ask (nothing waits on it then).
   */
  clusterVersion?: ClusterVersionResult;
}

/**
 * Keys of the waits the planner decides (typed, so a misspelt key is a compile error).
 * Each has a deadline (plan/waits.ts) counted from the first pass that waited on it.
 */
export type WaitKey =
  | `join:${string}`
  | `health:${string}`
  | `stale-node:${string}`
  | `retry:${string}:${string}`
  /** A new node observed for molt:rollout.soakSeconds before the next retirement (expiry: it passed). */
  | `soak:${string}`
  /** A chained upgrade's converged step (its minor) observed for molt:rollout.stepSoakSeconds (expiry: it passed). */
  | `step-soak:${string}`
  /** A node's target in the API load balancer is not healthy (a new node: not yet). */
  | `lb:${string}`
  | "leader"
  /** etcd's cluster version has not reached the minor every member runs (plan/cluster-version.ts). */
  | "etcd-cluster-version"
  | "kube"
  | "addons"
  | "vip"
  /** The cluster's ownership marker could not be read. */
  | "owner";

/** The world as one pass observed it: the stack's node list, etcd, Kubernetes, and the loop's memory. */
export interface World {
  intent: Intent;
  /** The node list as recorded in the stack state. */
  nodes: NodeEntry[];
  endpoints: NodeEndpoint[];
  /** Nodes the stack state holds resources of but the node list does not (a failed or killed surge). */
  orphans: string[];
  /** Absent when the cluster has no node yet, or etcd could not be reached at all. */
  etcd?: EtcdObservation;
  /** Why etcd could not be observed, when nodes exist but etcd is absent. */
  etcdError?: string;
  /** The Kubernetes view, when the intent runs Kubernetes and the API answered. */
  kube?: KubeObservation;
  /** Why Kubernetes could not be observed, when it should have been. */
  kubeError?: string;
  /** Who holds the API endpoint VIP (intent.vip set and the nodes reachable). */
  vip?: VipObservation;
  /**
   * The API load balancer's view of each node's target (plan/endpoint.ts): absent where molt
   * has no load balancer to ask (a VIP, vSphere, a provider without one).
   */
  lb?: LoadBalancerObservation;
  /** Keys of waits whose deadline has passed (kept by the loop, across passes). */
  expired: WaitKey[];
  /**
   * The node this run added and has not yet seen healthy. Only such a node can be rolled
   * back; any other unhealthy member stops the rollout instead (it may be an old node).
   */
  joining?: string;
  /** The new node this run is rolling back, and why its surge failed when it did. */
  rollingBack?: { node: string; why?: string };
  /** The operator controls' part of the loop's memory (orchestrator/controls/, plan/control-steps.ts). */
  controls?: RunControls;
  /**
   * molt:rollout.replaceCertificatesExpiringWithinDays: per node, its first certificate to
   * expire (observed over SSH), or why none could be read.
   */
  certificates?: Record<string, CertificateObservation>;
  /** The host files kubeadm-config references and who holds them (Kubernetes, when it names any). */
  hostFiles?: HostFilesObservation;
  /**
   * The cluster's ownership marker (core/ownership.ts) and who this run is; absent where the
   * caller does not ask (nothing is checked then).
   */
  ownership?: Ownership;
}

/** The part of the World the loop's memory supplies. */
export type WorldMemory = Pick<World, "expired" | "joining" | "rollingBack" | "controls">;

export type HookName = "postJoin" | "preRetire" | "postRetire";

export interface HookSpec {
  /** A command for `sh -c` on the machine running molt (molt:hooks); absent: a library callback only. */
  command?: string;
  timeoutSeconds: number;
}

export interface RunControls {
  /** Nodes whose etcd member this run removed to retire them (replacements done), in order. */
  retired: string[];
  /** The node this run added and then saw healthy: its postJoin hook and soak come before the next retirement. */
  watching?: string;
  /** Hooks that passed in this run, as `<hook>:<node>`. */
  hooksPassed: string[];
  /** A hook that failed in this run. */
  hookFailed?: { hook: HookName; node: string; why: string };
  /** Why no new replacement may start now (the maintenance window closed), when so. */
  windowClosed?: string;
}

export type CertificateObservation =
  { ok: true; path: string; notAfter: string; expiring: boolean; count: number } | { ok: false; error: string };

export type Operation =
  | { kind: "done"; reason: string }
  | { kind: "create-first"; entry: NodeEntry; reason: string }
  /** `hostFiles`: the cluster's host files, copied to the new node from `from` before it joins. */
  | { kind: "surge"; entry: NodeEntry; reason: string; hostFiles?: HostFileCarry }
  | { kind: "promote-learner"; node: string; memberId: string; via: string; reason: string }
  | { kind: "move-leader"; from: string; to: string; toId: string; reason: string }
  | { kind: "remove-member"; node: string; memberId: string; via: string; reason: string }
  | { kind: "remove-stray-member"; memberId: string; name: string; via: string; reason: string }
  /**
   * Destroys the node's machine, which molt owns, without a reset (its etcd member is gone,
   * it serves nothing: Cluster API's KubeadmControlPlane does not reset either); with
   * Kubernetes its Node object is deleted after the machine, through `deleteNodeVia`.
   */
  | { kind: "prune"; node: string; deleteNodeVia?: string; reason: string }
  /**
   * molt:rollout.pruneWithNextSurge: the prune of `node` (as `prune` says it) and the surge of
   * `entry` the planner decides on the world after that prune, in one engine run: the new
   * node is created (and joins) first, the retired node's machine is destroyed after it.
   */
  | {
      kind: "prune-and-surge";
      node: string;
      deleteNodeVia?: string;
      entry: NodeEntry;
      reason: string;
      hostFiles?: HostFileCarry;
    }
  /**
   * An adopted node without a member (`molt adopt`): reset over SSH, released from what molt
   * attached it to (the lab's HAProxy), its Node deleted, its entry dropped. Its machine is
   * not molt's: it stays, and the summary lists it for its owner.
   */
  | {
      kind: "retire-adopted";
      node: string;
      deleteNodeVia?: string;
      /** What of the cluster's is removed from the machine after its reset (keys, certificates, host files). */
      wipe: string[];
      /**
       * Host files kubeadm-config names outside /etc/kubernetes/: the machine is its owner's, so
       * they are left on it (they may be the owner's own) and the summary names them.
       */
      outside?: string[];
      /** Its SSH did not answer: not reset or wiped; the owner is told. */
      unreachable?: boolean;
      /**
       * Kubernetes was not observed, so `wipe` lacks the cluster's host files: they are read from
       * the node's own static pod manifests before its reset, by the same rule.
       */
      hostFilesUnknown?: boolean;
      reason: string;
    }
  | { kind: "prune-orphans"; nodes: string[]; reason: string }
  | { kind: "wait"; key: WaitKey; node?: string; reason: string }
  /** Removes the new node's member (through `via`, when it has one) and destroys it. */
  | { kind: "rollback"; node: string; memberId?: string; via?: string; reason: string; unreachable?: boolean }
  /** Ends the run as paused: a new node left for inspection, or (no node) a stop at a replacement boundary. */
  | { kind: "pause"; node?: string; reason: string }
  /** Runs an operator hook for `node` (orchestrator/act/hooks.ts). */
  | { kind: "hook"; hook: HookName; node: string; reason: string }
  | { kind: "refuse"; condition: string; reason: string }
  /**
   * Writes the cluster's ownership marker naming `owner`: where it is absent, or (`--take-over`)
   * where it still is at `ifRevision`. Comes before any other change of the cluster.
   */
  | { kind: "claim-ownership"; owner: ClusterOwner; ifRevision?: string; reason: string }
  | { kind: "update-cluster-config"; version: string; via: string; reason: string }
  | { kind: "drain"; node: string; via: string; reason: string }
  | { kind: "stop-apiserver"; node: string; reason: string }
  /**
   * A node that stays holds manifests a retirement moved aside (the node to retire changed
   * before it finished, e.g. the intent changed between runs): they go back, and with
   * `uncordon` the retirement's cordon is lifted through `via`.
   */
  | { kind: "restore-control-plane"; node: string; manifests: string[]; via: string; uncordon: boolean; reason: string }
  /**
   * The node to retire leaves the API load balancer: deregistered, then molt waits until the
   * load balancer reports it drained (its API server keeps serving meanwhile). `drain: false`:
   * a node removed because it failed (a rollback) or is dead (--replace-dead) is deregistered
   * without that wait (plan/endpoint.ts targetRemoval).
   */
  | { kind: "deregister-target"; node: string; drain?: false; reason: string }
  /** A node that stays was left deregistered (a run stopped mid-retirement): it is registered again. */
  | { kind: "register-target"; node: string; reason: string }
  /** The node to retire holds the API endpoint VIP: its keepalived stops, another node takes the VIP. */
  | { kind: "release-vip"; node: string; reason: string }
  | { kind: "delete-node"; node: string; via: string; reason: string }
  /** kube-proxy and CoreDNS images as `kubeadmNode`'s kubeadm names them, set through `via`. */
  | { kind: "update-addons"; version: string; via: string; kubeadmNode: string; reason: string };

export type OperationKind = Operation["kind"];

/** The host files a joining node gets, and the healthy node they are copied from. */
export interface HostFileCarry {
  from: string;
  files: HostFile[];
}

export type RolloutResultKind = "succeeded" | "noop" | "failed" | "paused" | "refused" | "rolled-back" | "cancelled";

/** molt:rollout.window (orchestrator/controls/window.ts reads it against a clock). */
export const WEEKDAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"] as const;

export type Weekday = (typeof WEEKDAYS)[number];

export interface MaintenanceWindow {
  /** The days a window opens on (a window past midnight closes the next day). */
  days: Weekday[];
  /** "HH:MM", local time in `timeZone`. */
  start: string;
  /** "HH:MM" (or "24:00"); earlier than `start`: the window runs past midnight. */
  end: string;
  timeZone: string;
}
