// The edges the rollout loop talks to, as small interfaces: the real ones reach etcd and
// Kubernetes through SSH tunnels (edges/etcd.ts, edges/kube.ts over edges/sessions.ts) and
// the engine (stack/edge.ts); test/support/fake-edges.ts implements them in memory.
import type { StackEdge } from "../stack/edge";
import type { StoredState } from "../stack/state";
import type { Alarm, EndpointStatus, Member } from "./etcd";
import type { LeaseKv } from "../cluster-lock";
import type { ComponentHealth, KubeNode, KubeObservation } from "./kube";
import type { VipObservation } from "./vip";
import type { SshAccessSettings } from "../../infra/remote/access";

export interface EtcdEdge {
  /** Per-member status, through that member's own endpoint. */
  status(node: string): Promise<EndpointStatus>;
  memberList(via: string): Promise<Member[]>;
  alarms(via: string): Promise<Alarm[]>;
  /** Idempotent: "member not found" is done. */
  memberRemove(via: string, id: string): Promise<void>;
  /** Idempotent: "not a learner" is done. */
  memberPromote(via: string, id: string): Promise<void>;
  /** Sent to the current leader's endpoint. */
  moveLeader(leaderNode: string, targetId: string): Promise<void>;
  /** An etcd snapshot of one member's database saved to a local file; returns its size. */
  snapshot(node: string, path: string): Promise<number>;
  /** The calls a lease in the cluster needs (orchestrator/cluster-lock.ts), through whichever member answers. */
  leaseKv(): LeaseKv;
}

export interface KubeEdge {
  components(node: string): Promise<ComponentHealth>;
  observeCluster(via: string): Promise<Omit<KubeObservation, "components" | "via">>;
  /** kube-proxy's DaemonSet (the addons wait between full passes). */
  readKubeProxy(via: string): Promise<KubeObservation["kubeProxy"]>;
  /** One Node (a waited-on node's readiness between full passes); undefined when there is none. */
  readNode(via: string, name: string): Promise<Omit<KubeNode, "leaseAgeSeconds"> | undefined>;
  setClusterConfigVersion(via: string, version: string): Promise<void>;
  cordon(via: string, node: string): Promise<void>;
  /** One round of evictions: what is left on the node, and what refused (PDBs). */
  evictRound(via: string, node: string): Promise<{ remaining: number; blocked: string[] }>;
  deleteNode(via: string, node: string): Promise<void>;
  stopApiServer(node: string, deadlineSeconds: number, signal?: AbortSignal): Promise<void>;
  updateAddons(via: string, kubeadmNode: string, version: string): Promise<void>;
}

/** The API endpoint VIP on the nodes (molt:apiEndpoint mode vip). */
export interface VipEdge {
  /** Which of `nodes` hold `address` (and which could not be asked). */
  observe(address: string, nodes: string[]): Promise<VipObservation>;
  /** Stops keepalived on the node and waits until the VIP left it; `resume` starts it again. */
  keepalived(node: string, address: string, action: "release" | "resume", deadlineSeconds: number): Promise<void>;
}

/** SSH access to the stack's nodes, and the etcd and Kubernetes edges over it. */
export interface NodeAccess {
  /** Sessions to exactly the state's nodes (kept warm across passes). */
  sync(state: StoredState): Promise<void>;
  /**
   * Starts opening sessions (and etcd tunnels) to listed nodes that have none, in the
   * background, dropping nothing: called when a change's new node list is known, before its
   * `up` returns, so the next observation does not pay for the connect.
   */
  warm?(state: StoredState): void;
  /** Nodes that could not be reached in the last sync, with the reason. */
  readonly unreachable: ReadonlyMap<string, string>;
  etcd(): Promise<EtcdEdge>;
  kube(): Promise<KubeEdge>;
  /** The VIP edge (absent where the access cannot run commands on nodes, e.g. some fakes). */
  vip?(): Promise<VipEdge>;
  /**
   * Runs a command on a node over its session and returns its output (throws unless it
   * exits 0). `SUDO ` in the command becomes `sudo -n ` for a login user that is not root.
   */
  run(node: string, command: string, what: string): Promise<string>;
  /** How sessions reach the nodes besides the stack's key (molt:ssh.agent and .bastion), for hooks. */
  readonly access?: SshAccessSettings;
  /** Forget the Kubernetes edge (its credentials or tunnels failed); the next call opens it again. */
  resetKube(): Promise<void>;
  close(): Promise<void>;
}

export interface Edges {
  stack: StackEdge;
  nodes: NodeAccess;
}
