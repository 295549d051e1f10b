// What one pass observes of etcd, Kubernetes and the API endpoint VIP: plain data the
// edges (orchestrator/edges/) produce and the planner reads.
import type { HostFile } from "./host-files";

export interface Member {
  /** Decimal string, as etcd3 gives it; never passed through Number. */
  id: string;
  name: string;
  peerURLs: string[];
  clientURLs: string[];
  isLearner: boolean;
}

export interface EndpointStatus {
  memberId: string;
  leader: string;
  raftIndex: bigint;
  raftAppliedIndex: bigint;
  raftTerm: bigint;
  dbSize: number;
  isLearner: boolean;
  version: string;
  errors: string[];
}

export interface Alarm {
  memberId: string;
  alarm: "NOSPACE" | "CORRUPT" | string;
}

export interface ComponentHealth {
  apiserver: { ok: boolean; version?: string; error?: string };
  controllerManager: { ok: boolean; error?: string };
  scheduler: { ok: boolean; error?: string };
  /**
   * Manifests stop-apiserver moved aside on the node (/etc/kubernetes/<pod>.yaml.retired),
   * asked only when something here is not healthy: a retirement that did not finish.
   */
  retiredManifests?: string[];
}

export interface KubeNode {
  name: string;
  ready: boolean;
  unschedulable: boolean;
  controlPlane: boolean;
  kubeletVersion: string;
  /** Seconds since the node's Lease was renewed (undefined: no lease). */
  leaseAgeSeconds?: number;
}

export interface KubeObservation {
  /** The node whose API server served the cluster-wide reads (and serves this pass's changes). */
  via: string;
  nodes: KubeNode[];
  /** Per stack node: its control-plane components, through its own tunnels. */
  components: Record<string, ComponentHealth>;
  /** Per Node name: pods a drain must evict (not DaemonSet pods, mirror pods or finished pods). */
  evictable: Record<string, number>;
  /** kubeadm-config's ClusterConfiguration.kubernetesVersion (without a leading v). */
  clusterConfigVersion?: string;
  /**
   * The host files kubeadm-config's ClusterConfiguration references (core/host-files.ts):
   * what a new node gets from the node it joins through before `kubeadm join`.
   */
  hostFiles?: HostFile[];
  /** kube-apiserver's --encryption-provider-config in kubeadm-config: Secrets are encrypted at rest. */
  encryptionProviderConfig?: string;
  /** kube-proxy's image tag (without v) and whether its DaemonSet has rolled out. */
  kubeProxy?: { version: string; rolledOut: boolean };
}

export interface VipObservation {
  address: string;
  /** Nodes that have the VIP on an interface (one, normally). */
  holders: string[];
  /** Nodes that could not be asked (no SSH session, or the command failed). */
  unobserved: string[];
  /**
   * Each asked node's VRRP state as keepalived's notify script last recorded it (MASTER,
   * BACKUP: eligible; FAULT: its endpoint check fails; STOP), absent when none is recorded.
   */
  states: Record<string, string>;
}

/**
 * A node's target as the API load balancer reports it, in AWS's words (Azure's pool and the
 * lab's HAProxy map onto them): `initial` registered, health checks not yet passed;
 * `healthy`; `unhealthy`; `draining` deregistered, the deregistration delay still running;
 * `unused` not registered (or drained).
 */
export type TargetState = "initial" | "healthy" | "unhealthy" | "draining" | "unused";

export type TargetObservation = { state: TargetState; detail?: string } | { error: string };

/** The API load balancer in front of the nodes (World.lb): absent where molt talks to none. */
export interface LoadBalancerObservation {
  /** How reports name it ("lab HAProxy lab-1", "target group kubeone-api"). */
  name: string;
  /** Per stack node. */
  targets: Record<string, TargetObservation>;
  /**
   * The longest a deregistration takes to drain as the load balancer is set up (its
   * deregistration delay, plus its health check's interval x unhealthy threshold).
   */
  drainSeconds: number;
  /** Its health check of a target, as a refusal names it ("a TCP check of port 2379"), where the edge knows it. */
  healthCheck?: string;
}
