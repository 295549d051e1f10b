// The edges the rollout loop talks to, as small interfaces beside the core that uses them:
// the real ones reach etcd and Kubernetes through SSH tunnels (orchestrator/edges/) and the
// engine (orchestrator/stack/edge.ts); test/support/fake-edges.ts implements them in memory.
import type { CloudMachine } from "./leaks";
import type { Operation } from "./model";
import type { NodeEntry, SshAccessSettings, StoredState } from "./nodes";
import type { PodLike } from "./drain";
import type { OwnerRecord } from "./ownership";
import type {
  Alarm,
  ComponentHealth,
  EndpointStatus,
  KubeNode,
  KubeObservation,
  LoadBalancerObservation,
  Member,
  VipObservation,
} from "./observations";
import type { NodeEndpoint } from "./nodes";

export interface EtcdEdge {
  /** Per-member status, through that member's own endpoint. */
  status(node: string): Promise<EndpointStatus>;
  memberList(via: string): Promise<Member[]>;
  /**
   * etcd's cluster version as `via`'s member reports it (its /version `etcdcluster`: "3.6.0",
   * or "not_decided" right after a cluster starts).
   */
  clusterVersion(via: string): Promise<string>;
  alarms(via: string): Promise<Alarm[]>;
  /** Idempotent: "member not found" is done. */
  memberRemove(via: string, id: string): Promise<void>;
  /** Idempotent: "not a learner" is done. */
  promoteLearner(via: string, id: string): Promise<void>;
  /** Sent to the current leader's endpoint. */
  moveLeader(leaderNode: string, targetId: string): Promise<void>;
  /** An etcd snapshot of one member's database saved to a local file; returns its size. */
  snapshot(node: string, path: string): Promise<number>;
  /** The calls a lease in the cluster needs (orchestrator/lease/cluster.ts), through whichever member answers. */
  leaseKv(): LeaseKv;
  /** The cluster's ownership marker (core/ownership.ts OWNER_KEY), read linearizably; undefined when absent. */
  readOwner(): Promise<OwnerRecord | undefined>;
  /**
   * Writes the marker in one transaction: only if the key is absent or, with `ifRevision`, still
   * at that revision; else returns what it holds (undefined: deleted meanwhile).
   */
  writeOwner(
    value: string,
    ifRevision?: string,
  ): Promise<{ ok: true; revision: string } | { ok: false; current?: OwnerRecord }>;
  /** Deletes the marker if it is still at `revision`; true when it was. */
  removeOwner(revision: string): Promise<boolean>;
}

/** An eviction's answer: done, the pod already gone (404), or refused now by a PodDisruptionBudget (429). */
export type Eviction = { kind: "evicted" } | { kind: "gone" } | { kind: "refused"; message: string };

export interface KubeEdge {
  components(node: string): Promise<ComponentHealth>;
  observeCluster(via: string): Promise<Omit<KubeObservation, "components" | "via">>;
  /** kube-proxy's DaemonSet (the addons wait between full passes). */
  readKubeProxy(via: string): Promise<KubeObservation["kubeProxy"]>;
  /** One Node (a waited-on node's readiness between full passes); undefined when there is none. */
  readNode(via: string, name: string): Promise<Omit<KubeNode, "leaseAgeSeconds"> | undefined>;
  setClusterConfigVersion(via: string, version: string): Promise<void>;
  cordon(via: string, node: string): Promise<void>;
  /** The pods on `node`, unfiltered: the drain policy (core/drain.ts) decides which go. */
  podsOn(via: string, node: string): Promise<PodLike[]>;
  /** One eviction through the Eviction API (PodDisruptionBudgets honoured). */
  evict(via: string, namespace: string, name: string): Promise<Eviction>;
  /**
   * Deletes the Node; with `machineGone` (the machine was destroyed) also the pods still bound
   * to it, at once. Returns what could not be done about those pods (left to the pod GC).
   */
  deleteNode(via: string, node: string, o?: { machineGone?: boolean }): Promise<string[]>;
  /** Resolves with what went wrong but did not stop it (a leader Lease not handed on). */
  stopApiServer(node: string, deadlineSeconds: number, signal?: AbortSignal): Promise<string[]>;
  /**
   * Puts manifests stop-apiserver moved aside back (their kubelet starts the pods again), once
   * the stopped processes have exited (within `deadlineSeconds`: their grace period).
   */
  restoreControlPlane(node: string, manifests: string[], deadlineSeconds: number, signal?: AbortSignal): Promise<void>;
  /** Marks a node schedulable again (idempotent). */
  uncordon(via: string, node: string): Promise<void>;
  updateAddons(via: string, kubeadmNode: string, version: string): Promise<void>;
}

/** The API endpoint VIP on the nodes (molt:apiEndpoint mode vip). */
export interface VipEdge {
  /** Which of `nodes` hold `address` (and which could not be asked). */
  observe(address: string, nodes: string[]): Promise<VipObservation>;
  /** Stops keepalived on the node and waits until the VIP left it; `resume` starts it again. */
  keepalived(node: string, address: string, action: "release" | "resume", deadlineSeconds: number): Promise<void>;
  /**
   * Does the endpoint answer through the VIP, asked from `node` (over the network once the
   * node no longer holds it): kube-apiserver's /readyz, or etcd's /health on etcd-only nodes.
   */
  answers(node: string, address: string, endpoint: "apiserver" | "etcd"): Promise<boolean>;
}

/**
 * The API load balancer in front of the nodes, as its own API reports it (the lab's HAProxy,
 * an AWS target group or classic ELB, an Azure backend pool): what retirement deregisters a
 * node from before its API server stops, and what a new node must be healthy in.
 */
export interface LoadBalancerEdge {
  /** Each node's target (nodes as the state records them: names, addresses, provider ids). */
  observe(nodes: readonly NodeEndpoint[]): Promise<LoadBalancerObservation>;
  /**
   * `observe` is a local read, cheap enough to repeat every 100 ms while a wait on the load
   * balancer lasts (the lab's HAProxy socket). A cloud API is not asked that often: its waits
   * are observed on the loop's poll interval.
   */
  readonly watchable?: boolean;
  /** Takes the node out of rotation (new connections go elsewhere; open ones drain). Idempotent. */
  deregister(node: NodeEndpoint): Promise<void>;
  /** Puts it back (a retirement that did not finish). Idempotent. */
  register(node: NodeEndpoint): Promise<void>;
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
  /** The API load balancer, where molt can ask it; absent: retirement is not load-balancer aware. */
  lb?: LoadBalancerEdge;
}

/** The stack's node list and what its state holds besides (resources of unlisted nodes). */
export interface StackState extends StoredState {
  /** Nodes whose resources are in the state but not in the list (a failed or killed surge). */
  orphans: string[];
}

/** One change of the node list: append one new node, drop one node, or both (`prune-and-surge`). */
export interface NodeListChange {
  op: Extract<
    Operation,
    { kind: "create-first" | "surge" | "prune" | "rollback" | "retire-adopted" | "prune-and-surge" }
  >;
  prev: NodeEntry[];
  next: NodeEntry[];
  /** The node the change is about (`prune-and-surge`: the node it destroys; `op.entry` is the one it adds). */
  node: string;
  /**
   * Engine environment for this change's `up` (orchestrator/teardown.ts): a pruned machine is
   * destroyed without its reset; a rolled-back one the planner saw dead, if it still does not answer.
   */
  teardownEnv?: Record<string, string>;
}

/** What the loop needs of the engine (a fake implements it in the loop's unit tests). */
export interface StackEdge {
  readonly name: string;
  /** Clears what a killed run left (the engine's lock, pending operations); returns what was cleared. */
  prepare(): Promise<ClearedOperation[]>;
  /** The stored state (read again only when this run's own knowledge of it may be stale). */
  state(): Promise<StackState>;
  /** Applies one change with a targeted `up`; every resource of a removed node must be gone after it. */
  apply(change: NodeListChange): Promise<void>;
  /** Destroys what the state holds of nodes the list does not, with a targeted `up` over the unchanged list. */
  destroyOrphans(nodes: string[]): Promise<void>;
  /**
   * Releases an adopted node's machine from what the provider attached it to outside the
   * state (the lab: the cluster's own HAProxy, molt:lab.loadBalancer); returns what was done.
   * A cloud's load balancer holds it through the node's `<node>-api` resource, which the
   * update that drops its entry deletes: what that will do is returned here too.
   */
  releaseAdopted(entry: NodeEntry): Promise<string[]>;
  /** The provider ids of the state's resources of one type (a cloud's machines: which of them the state holds). */
  resourceIds?(type: string): Promise<string[]>;
  /** Waits for the edge's own background reads (the export after the last change) to end. */
  quiesce?(): Promise<void>;
  /**
   * Whether the backend records an update of the stack under way (a service such as Pulumi
   * Cloud lists it in the stack's history; a DIY backend's lock is read by the lease instead).
   */
  updateInProgress?(): Promise<boolean>;
  /** Cancels the update under way the engine's way (`pulumi cancel`). */
  cancelUpdate?(): Promise<void>;
}

export interface ClearedOperation {
  urn: string;
  operation: string;
  reason: string;
}

/** The few etcd calls the cluster lease needs (etcdLeaseKv; an in-memory one in the loop's tests). */
export interface LeaseKv {
  /** For messages: which cluster, through which members. */
  readonly location: string;
  /** Grants a lease of `ttlSeconds`; its id (decimal). */
  grant(ttlSeconds: number): Promise<string>;
  /** Keeps the lease alive: its time to live now, in seconds (<= 0: etcd no longer has it). */
  keepAlive(id: string): Promise<number>;
  /** Seconds the lease has left (<= 0: gone). */
  timeToLive(id: string): Promise<number>;
  revoke(id: string): Promise<void>;
  /**
   * One transaction: if `key` is absent (or, with `ifRevision`, still at that revision), puts
   * `value` under `key` on `lease` and under `last` without one, and returns the new revision
   * with what `last` held before; else returns what `key` holds.
   */
  take(
    key: string,
    last: string,
    value: Buffer,
    lease: string,
    ifRevision?: string,
  ): Promise<{ ok: true; revision: string; previousLast?: Buffer } | { ok: false; current?: KvEntry }>;
  get(key: string): Promise<KvEntry | undefined>;
  /** Deletes `key` and `last` if `key` is still at `revision`; true when it was. */
  release(key: string, last: string, revision: string): Promise<boolean>;
}

export interface KvEntry {
  value: Buffer;
  lease: string;
  revision: string;
}

/**
 * A cloud's list of the control-plane machines that carry molt's tags for one cluster
 * (core/leaks.ts decides which of them leaked), and their termination.
 */
export interface MachineInventory {
  /** Where the machines are listed, for reports (e.g. "aws eu-central-1"). */
  readonly where: string;
  /** The state's resource type of these machines (e.g. aws:ec2/instance:Instance). */
  readonly resourceType: string;
  /** The form in which the cloud's and the state's ids compare (Azure: case-insensitive ARM ids). */
  idKey?(id: string): string;
  list(): Promise<CloudMachine[]>;
  terminate(ids: readonly string[]): Promise<void>;
}
