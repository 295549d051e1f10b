// In-memory edges for the loop's unit tests: a stack whose `up` makes or destroys machines,
// machines whose join adds an etcd member, and an etcd cluster with members, a leader,
// alarms and per-member health. Faults are switches on the world.
import { StateChangedByAnotherRunError } from "../../orchestrator/stack/state-changed";
import type { LeaseKv } from "../../orchestrator/core/edges";
import { MemoryLeaseKv } from "./memory-lease-kv";
import type { EdgeFactory } from "../../orchestrator/edges/open";
import type {
  EtcdEdge,
  Eviction,
  KubeEdge,
  LoadBalancerEdge,
  NodeAccess,
  VipEdge,
} from "../../orchestrator/core/edges";
import type { PodLike } from "../../orchestrator/core/drain";
import type { Alarm, EndpointStatus, Member, NodeEndpoint, NodeEntry } from "../../orchestrator/core/model";
import type { ComponentHealth, LoadBalancerObservation, TargetState } from "../../orchestrator/core/observations";
import type { ClearedOperation } from "../../orchestrator/core/edges";
import type { OwnerRecord } from "../../orchestrator/core/ownership";
import type { NodeListChange, StackEdge, StackState } from "../../orchestrator/core/edges";
import { UpFailedError } from "../../orchestrator/stack/up-events";

/** A failed `up` as the engine edge reports it: the step of `node`'s `<resource>` failed. */
function failedUp(node: string, resource: string, why: string): UpFailedError {
  const urn = `urn:pulumi:lab::molt::molt:lab:ControlPlaneNode$molt:Fake::${node}-${resource}`;
  const none = new Set<string>();
  return new UpFailedError(`error: update failed\n[${node}] error: ${why}`, {
    created: none,
    deleted: none,
    finished: none,
    changed: none,
    failed: [urn],
    complete: false,
  });
}

export interface FakeMachine {
  entry: NodeEntry;
  address: string;
  /** The machine answers SSH and its etcd answers. */
  up: boolean;
}

/** The world the fakes share; tests read it to check what happened and flip faults. */
/** The state's resource type of a fake machine (StackEdge.resourceIds). */
export const FAKE_MACHINE_TYPE = "fake:machine";

export class FakeWorld {
  /** The node list as the stack's outputs hold it. */
  list: NodeEntry[] = [];
  /** Machines the state holds resources of (listed or not: a failed surge leaves one). */
  machines = new Map<string, FakeMachine>();
  /** Adopted machines molt retired: no longer in the state, still running, reset (their owner deletes them). */
  leftForOwner = new Map<string, FakeMachine>();
  members: Member[] = [];
  /** The cluster's etcd keys and leases (molt:lock.in cluster holds its lease here). */
  kv = new MemoryLeaseKv();
  /** The cluster's ownership marker key (core/ownership.ts), with its revision. */
  owner?: OwnerRecord;
  private ownerRevision = 1;
  leaderId = "0";
  alarms: Alarm[] = [];
  etcdVersion = "3.6.16";
  /** The etcd version a machine of this image runs (default: etcdVersion for every image). */
  etcdVersionOf?: (image: string) => string | undefined;
  /**
   * etcd's cluster version as its leader last set it (undefined: not decided yet). Each read
   * raises it to the lowest minor the started members run, as etcd's leader does on its own,
   * unless `clusterVersionLagReads` says the leader has not got round to it yet.
   */
  clusterVersion?: string;
  /** The next this many reads that would raise the cluster version still see the old one. */
  clusterVersionLagReads = 0;
  /** Reads of the cluster version (a raise is logged as "etcd cluster version 3.6.0 -> 3.7.0"). */
  clusterVersionReads = 0;
  private nextId = 1n;
  /** Every call the loop made, in order ("up surge lab-cp-4", "etcd memberRemove ..."). */
  log: string[] = [];
  /** Faults. */
  faults: {
    /** The next surge's machine comes up but its member never starts (an unstarted learner). */
    joinNeverStarts?: boolean;
    /**
     * The next surge's member starts (a voter, as kubeadm join promotes it) only after its
     * status has been read this many times: a join still under way when its `up` returned.
     */
    joinStartsAfterReads?: number;
    /** The next surge's `up` fails after the machine's resources were made, before the list was written. */
    upFailsAfterCreate?: boolean;
    /** The next `up` is refused by the state guard (another run changed the stack): nothing is touched. */
    stateChangedOnNextUp?: boolean;
    /**
     * The next prune-and-surge's `up` creates the new node and writes the list, then fails to
     * delete the retired node's machine (it stays in the state, unlisted).
     */
    deleteFailsAfterCreate?: boolean;
    /**
     * The next prune-and-surge's `up` writes the list (as the lab's does before the join), then
     * the new node's join fails: its member never starts, the retired machine is still there.
     */
    joinFailsAfterListWritten?: boolean;
    /** The process "dies" right after this many applied changes (the next read of the state throws). */
    crashAfterApply?: number;
    /** A released VIP is taken by no other node, though they say BACKUP (VRRP adverts do not reach them). */
    vipNotTakenOver?: boolean;
    /** The new nodes' keepalived stays in FAULT (their endpoint check fails). */
    vipNewNodesFault?: boolean;
    /** Starting keepalived again on a node that released the VIP fails. */
    vipResumeFails?: boolean;
    /** The VIP's new holder does not answer requests through it (the hand-off never completes). */
    vipNotAnswering?: boolean;
    /** Reading etcd's cluster version (/version) fails on every member. */
    clusterVersionReadFails?: boolean;
    /** Reading the ownership marker fails (no member answers that read). */
    ownerReadFails?: boolean;
    /** Another stack's claim lands between this run's read of the marker and its write: this value. */
    ownerClaimedFirst?: string;
    /** The next new machine's target never passes the load balancer's health check. */
    lbNeverHealthy?: boolean;
    /** The process "dies" right after the next deregistration (the load balancer keeps it). */
    crashAfterDeregister?: boolean;
  } = {};
  /**
   * The API load balancer, when a test sets it (`w.lb = new Map()`): each node's target; a
   * machine booted is registered (healthy), a deregistered one drains for one observation.
   */
  lb?: Map<string, TargetState>;
  /**
   * The API endpoint VIP (molt:apiEndpoint mode vip), when the test enables it: its holder,
   * moved as keepalived would (no preemption; a released or lost VIP goes to the newest
   * machine whose keepalived runs).
   */
  vip?: { holder?: string; stopped: Set<string> };
  applies = 0;
  /** A new member that starts after this many reads of its status (faults.joinStartsAfterReads). */
  startsAfterReads?: { node: string; reads: number };
  /** Status reads per node. */
  statusReads = new Map<string, number>();
  /** Certificate expiry per node (openssl's notAfter text); a node not named has one years away. */
  certificates: Record<string, string> = {};
  /**
   * A Kubernetes control plane on the machines, when a test sets it: every machine's API
   * server runs its entry's kubernetesVersion and is ready until stopped; a Node per machine.
   */
  kube?: FakeKube;

  /** Sets the ownership marker key as another writer would (a new revision). */
  setOwner(value: string | undefined): void {
    this.owner = value === undefined ? undefined : { value, revision: String(++this.ownerRevision) };
  }

  /** A cluster of `n` healthy nodes on `image`, made by hand (as if an earlier run made them). */
  static cluster(n: number, image: string, stack = "lab"): FakeWorld {
    const w = new FakeWorld();
    for (let g = 1; g <= n; g++) {
      const entry: NodeEntry = { name: `${stack}-cp-${g}`, image, role: "control-plane", generation: g, init: g === 1 };
      w.list.push(entry);
      w.boot(entry, true);
    }
    w.leaderId = w.members[0].id;
    return w;
  }

  /** Makes the machine; it joins etcd as a voter (as kubeadm join promotes), or as an unstarted learner. */
  boot(entry: NodeEntry, joins: boolean): void {
    const address = `10.0.0.${entry.generation}`;
    this.machines.set(entry.name, { entry, address, up: true });
    if (this.lb) {
      this.lb.set(entry.name, this.faults.lbNeverHealthy ? "unhealthy" : "healthy");
      this.faults.lbNeverHealthy = false;
    }
    const id = String(this.nextId++);
    this.members.push(
      joins
        ? { id, name: entry.name, peerURLs: [`https://${address}:2380`], clientURLs: [], isLearner: false }
        : { id, name: "", peerURLs: [`https://${address}:2380`], clientURLs: [], isLearner: true },
    );
    if (this.leaderId === "0" && joins) this.leaderId = id;
  }

  /** keepalived's election after the holder left: the newest running machine takes the VIP. */
  electVip(): void {
    const v = this.vip;
    if (!v || (v.holder && this.machines.get(v.holder)?.up && !v.stopped.has(v.holder))) return;
    v.holder = this.faults.vipNotTakenOver
      ? undefined
      : [...this.machines.values()]
          .filter((m) => m.up && !v.stopped.has(m.entry.name))
          .sort((a, b) => b.entry.generation - a.entry.generation)[0]?.entry.name;
  }

  /**
   * The one-minor-at-a-time policy as a failure the fake can show: a member of `image` more
   * than one minor above the cluster version fails its join. Real etcd checks only its
   * MinClusterVersion (3.0.0) and would let it in, unsupported; the fake fails so that a
   * planner that ignores the policy is seen to.
   */
  joinRefusal(image: string): string | undefined {
    const own = /^(\d+)\.(\d+)/.exec(this.etcdVersionOf?.(image) ?? this.etcdVersion);
    const cluster = this.clusterVersion ? /^(\d+)\.(\d+)/.exec(this.clusterVersion) : null;
    if (!own || !cluster) return undefined;
    const [j, c] = [Number(own[1]) * 1000 + Number(own[2]), Number(cluster[1]) * 1000 + Number(cluster[2])];
    return j > c + 1
      ? `fake etcd (policy, not etcd's own check): cluster version ${this.clusterVersion} ` +
          "is more than one minor below this member's"
      : undefined;
  }

  /** The etcd version `node`'s machine runs. */
  etcdVersionOn(node: string): string {
    const m = this.machines.get(node);
    return (m && this.etcdVersionOf?.(m.entry.image)) ?? this.etcdVersion;
  }

  memberOf(node: string): Member | undefined {
    const m = this.machines.get(node);
    return this.members.find((x) => x.name === node || (m && x.peerURLs.some((u) => u.includes(`//${m.address}:`))));
  }

  endpoint(name: string): NodeEndpoint {
    const m = this.machines.get(name)!;
    return {
      name,
      privateAddress: m.address,
      sshHost: m.address,
      sshPort: 22,
      hostPublicKey: "ssh-ed25519 AAAA",
      providerId: `fake/${name}`,
    };
  }
}

/** The fake cluster's Kubernetes (FakeWorld.kube): kubeadm-config, kube-proxy and what molt did to Nodes. */
export interface FakeKube {
  clusterConfigVersion: string;
  kubeProxy: { version: string; rolledOut: boolean };
  cordoned: Set<string>;
  /** Machines whose kube-apiserver molt stopped. */
  stopped: Set<string>;
}

/** Kubernetes of `version` on `w`'s machines (kubeadm-config and kube-proxy at it). */
export function withFakeKube(w: FakeWorld, version: string): FakeWorld {
  w.kube = {
    clusterConfigVersion: version,
    kubeProxy: { version, rolledOut: true },
    cordoned: new Set(),
    stopped: new Set(),
  };
  for (const n of w.list) n.kubernetesVersion = version;
  for (const m of w.machines.values()) m.entry.kubernetesVersion = version;
  return w;
}

/** What stop-apiserver leaves on a fake machine, as the real edge reports it. */
export const FAKE_RETIRED_MANIFESTS = ["kube-apiserver", "kube-controller-manager", "kube-scheduler"].map(
  (n) => `/etc/kubernetes/${n}.yaml.retired`,
);

class FakeKubeEdge implements KubeEdge {
  constructor(private readonly w: FakeWorld) {}
  private get k(): FakeKube {
    return this.w.kube!;
  }
  private node(name: string) {
    const m = this.w.machines.get(name);
    if (!m?.up) return undefined;
    return {
      name,
      ready: true,
      unschedulable: this.k.cordoned.has(name),
      controlPlane: true,
      kubeletVersion: `v${m.entry.kubernetesVersion}`,
    };
  }
  private api(via: string): void {
    const m = this.w.machines.get(via);
    if (!m?.up || this.k.stopped.has(via)) throw new Error(`the API server of ${via} does not answer`);
  }
  async components(node: string): Promise<ComponentHealth> {
    const m = this.w.machines.get(node);
    const ok = !!m?.up && !this.k.stopped.has(node) && !!this.w.memberOf(node)?.name;
    const stopped = !!m?.up && this.k.stopped.has(node);
    return {
      apiserver: ok ? { ok, version: m!.entry.kubernetesVersion } : { ok, error: "connection refused" },
      controllerManager: stopped ? { ok: false, error: "connection refused" } : { ok: true },
      scheduler: stopped ? { ok: false, error: "connection refused" } : { ok: true },
      ...(stopped ? { retiredManifests: FAKE_RETIRED_MANIFESTS } : {}),
    };
  }
  async observeCluster(via: string) {
    this.api(via);
    return {
      nodes: [...this.w.machines.keys()].flatMap((n) => {
        const k = this.node(n);
        return k ? [{ ...k, leaseAgeSeconds: 1 }] : [];
      }),
      evictable: {},
      clusterConfigVersion: this.k.clusterConfigVersion,
      kubeProxy: { ...this.k.kubeProxy },
    };
  }
  async readKubeProxy(via: string) {
    this.api(via);
    return { ...this.k.kubeProxy };
  }
  async readNode(via: string, name: string) {
    this.api(via);
    return this.node(name);
  }
  async setClusterConfigVersion(via: string, version: string): Promise<void> {
    this.api(via);
    this.w.log.push(`kube kubeadm-config ${version}`);
    this.k.clusterConfigVersion = version;
  }
  async cordon(via: string, node: string): Promise<void> {
    this.api(via);
    this.w.log.push(`kube cordon ${node}`);
    this.k.cordoned.add(node);
  }
  /** No workloads on the fake cluster: a drain finds nothing to evict. */
  async podsOn(via: string): Promise<PodLike[]> {
    this.api(via);
    return [];
  }
  async evict(via: string): Promise<Eviction> {
    this.api(via);
    return { kind: "evicted" };
  }
  async deleteNode(via: string, node: string, o: { machineGone?: boolean } = {}): Promise<string[]> {
    this.api(via);
    this.w.log.push(`kube delete-node ${node}${o.machineGone ? " (machine gone)" : ""}`);
    this.k.cordoned.delete(node);
    return [];
  }
  async stopApiServer(node: string): Promise<string[]> {
    this.w.log.push(`kube stop-apiserver ${node}`);
    this.k.stopped.add(node);
    return [];
  }
  async restoreControlPlane(node: string, manifests: string[]): Promise<void> {
    this.w.log.push(`kube restore-control-plane ${node} ${manifests.join(",")}`);
    this.k.stopped.delete(node);
  }
  async uncordon(via: string, node: string): Promise<void> {
    this.api(via);
    this.w.log.push(`kube uncordon ${node}`);
    this.k.cordoned.delete(node);
  }
  async updateAddons(via: string, _kubeadmNode: string, version: string): Promise<void> {
    this.api(via);
    this.w.log.push(`kube addons ${version}`);
    this.k.kubeProxy = { version, rolledOut: true };
  }
}

class FakeStack implements StackEdge {
  readonly name: string;
  constructor(
    private readonly w: FakeWorld,
    name: string,
  ) {
    this.name = name;
  }

  async prepare(): Promise<ClearedOperation[]> {
    return [];
  }

  /** Machines are the state's only resources with ids: `fake-<node>`. */
  async resourceIds(type: string): Promise<string[]> {
    return type === FAKE_MACHINE_TYPE ? [...this.w.machines.keys()].map((n) => `fake-${n}`) : [];
  }

  async state(): Promise<StackState> {
    if (this.w.faults.crashAfterApply === this.w.applies) {
      this.w.faults.crashAfterApply = undefined;
      throw new Error("killed (simulated crash of molt)");
    }
    const listed = new Set(this.w.list.map((n) => n.name));
    return {
      nodes: this.w.list.map((n) => ({ ...n })),
      endpoints: this.w.list.map((n) => this.w.endpoint(n.name)),
      sshUser: "root",
      sshPrivateKey: "fake-key",
      orphans: [...this.w.machines.keys()].filter((n) => !listed.has(n)),
    };
  }

  async apply(change: NodeListChange): Promise<void> {
    const w = this.w;
    // As the engine edge checks before its `up`: the change was decided on the stored list.
    if (JSON.stringify(w.list.map((n) => n.name)) !== JSON.stringify(change.prev.map((n) => n.name)))
      throw new Error("the stored node list changed under this run; stopping without changes");
    if (w.faults.stateChangedOnNextUp) {
      w.faults.stateChangedOnNextUp = false;
      w.log.push(`up ${change.op.kind} ${change.node} refused by the state guard`);
      throw new StateChangedByAnotherRunError("lab");
    }
    w.applies++;
    w.log.push(`up ${change.op.kind} ${change.node}`);
    if (change.op.kind === "prune-and-surge") {
      w.log[w.log.length - 1] += `+${change.op.entry.name}`;
      // The engine creates the new node first; deletes come after the program registered everything.
      const refusal = w.joinRefusal(change.op.entry.image);
      const joins = !w.faults.joinNeverStarts && !refusal;
      w.faults.joinNeverStarts = false;
      if (refusal) w.log.push(refusal);
      const joinFails = !!w.faults.joinFailsAfterListWritten || !!refusal;
      w.faults.joinFailsAfterListWritten = false;
      w.boot(change.op.entry, joins && !joinFails);
      if (w.faults.upFailsAfterCreate) {
        w.faults.upFailsAfterCreate = false;
        throw failedUp(change.op.entry.name, "etcd", "the join script exited 1");
      }
      w.list = change.next.map((n) => ({ ...n }));
      if (joinFails) throw failedUp(change.op.entry.name, "etcd", "the join script exited 1");
      if (w.faults.deleteFailsAfterCreate) {
        w.faults.deleteFailsAfterCreate = false;
        throw failedUp(change.node, "machine", "deleting the machine failed");
      }
      w.machines.delete(change.node);
    } else if (change.op.kind === "surge" || change.op.kind === "create-first") {
      const entry = change.next[change.next.length - 1];
      const slow = w.faults.joinStartsAfterReads;
      w.faults.joinStartsAfterReads = undefined;
      if (slow !== undefined) w.startsAfterReads = { node: entry.name, reads: slow };
      const refusal = w.joinRefusal(entry.image);
      const joins = !w.faults.joinNeverStarts && slow === undefined && !refusal;
      w.faults.joinNeverStarts = false;
      w.boot(entry, joins);
      if (refusal) {
        // The member was added, then etcd stopped at start: the join script fails.
        w.log.push(refusal);
        throw failedUp(entry.name, "etcd", refusal);
      }
      if (w.faults.upFailsAfterCreate) {
        w.faults.upFailsAfterCreate = false;
        // The machine exists (and its member may), the list was never written.
        throw failedUp(entry.name, "etcd", "the join script exited 1");
      }
    } else if (change.op.kind === "retire-adopted") {
      // Only its record leaves the state: the machine is not molt's.
      w.leftForOwner.set(change.node, w.machines.get(change.node)!);
      w.machines.delete(change.node);
    } else {
      w.machines.delete(change.node);
    }
    w.list = change.next.map((n) => ({ ...n }));
    w.electVip();
  }

  async releaseAdopted(entry: NodeEntry): Promise<string[]> {
    this.w.log.push(`release ${entry.name}`);
    return [];
  }

  async destroyOrphans(nodes: string[]): Promise<void> {
    this.w.log.push(`up prune-orphans ${nodes.join(",")}`);
    for (const n of nodes) this.w.machines.delete(n);
  }
}

class FakeEtcd implements EtcdEdge {
  constructor(private readonly w: FakeWorld) {}

  leaseKv(): LeaseKv {
    if (!this.w.members.length) throw new Error("14 UNAVAILABLE: the fake cluster has no etcd member");
    return this.w.kv;
  }

  async readOwner(): Promise<OwnerRecord | undefined> {
    if (this.w.faults.ownerReadFails) throw new Error("reading the ownership marker failed on every reachable member");
    return this.w.owner && { ...this.w.owner };
  }

  async writeOwner(value: string, ifRevision?: string) {
    const w = this.w;
    if (w.faults.ownerClaimedFirst !== undefined) {
      w.setOwner(w.faults.ownerClaimedFirst);
      w.faults.ownerClaimedFirst = undefined;
    }
    w.log.push(`etcd writeOwner ${value}${ifRevision ? ` if revision ${ifRevision}` : ""}`);
    const free = ifRevision === undefined ? !w.owner : w.owner?.revision === ifRevision;
    if (!free) return { ok: false as const, ...(w.owner ? { current: { ...w.owner } } : {}) };
    w.setOwner(value);
    return { ok: true as const, revision: w.owner!.revision };
  }

  async removeOwner(revision: string): Promise<boolean> {
    this.w.log.push(`etcd removeOwner if revision ${revision}`);
    if (this.w.owner?.revision !== revision) return false;
    this.w.owner = undefined;
    return true;
  }

  private machine(node: string): FakeMachine {
    const m = this.w.machines.get(node);
    if (!m?.up) throw new Error(`14 UNAVAILABLE: no connection to ${node}`);
    return m;
  }

  async status(node: string): Promise<EndpointStatus> {
    this.machine(node);
    const w = this.w;
    w.statusReads.set(node, (w.statusReads.get(node) ?? 0) + 1);
    if (w.startsAfterReads?.node === node && --w.startsAfterReads.reads <= 0) {
      w.startsAfterReads = undefined;
      const m = w.memberOf(node)!;
      Object.assign(m, { name: node, isLearner: false });
    }
    const member = w.memberOf(node);
    if (!member || (member.isLearner && member.name === ""))
      throw new Error(`14 UNAVAILABLE: etcd on ${node} is not running`);
    return {
      memberId: member.id,
      leader: this.w.leaderId,
      raftIndex: 100n,
      raftAppliedIndex: 100n,
      raftTerm: 2n,
      dbSize: 1 << 20,
      isLearner: member.isLearner,
      version: w.etcdVersionOn(node),
      errors: [],
    };
  }

  async clusterVersion(via: string): Promise<string> {
    this.machine(via);
    const w = this.w;
    w.clusterVersionReads++;
    if (w.faults.clusterVersionReadFails) throw new Error("etcd /version: no answer within 5000 ms");
    const minors = [...w.machines.values()]
      .filter((m) => m.up && w.memberOf(m.entry.name)?.name)
      .map((m) => /^(\d+)\.(\d+)/.exec(w.etcdVersionOn(m.entry.name))!)
      .map((r) => [Number(r[1]), Number(r[2])] as const)
      .sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    if (!minors.length) return w.clusterVersion ?? "not_decided";
    const lowest = `${minors[0][0]}.${minors[0][1]}.0`;
    const cur = w.clusterVersion ? /^(\d+)\.(\d+)/.exec(w.clusterVersion) : null;
    const raise =
      !cur || Number(cur[1]) < minors[0][0] || (Number(cur[1]) === minors[0][0] && Number(cur[2]) < minors[0][1]);
    if (raise && w.clusterVersion && w.clusterVersionLagReads > 0) w.clusterVersionLagReads--;
    else if (raise) {
      if (w.clusterVersion) w.log.push(`etcd cluster version ${w.clusterVersion} -> ${lowest}`);
      w.clusterVersion = lowest;
    }
    return w.clusterVersion ?? "not_decided";
  }

  async memberList(via: string): Promise<Member[]> {
    this.machine(via);
    return this.w.members.map((m) => ({ ...m }));
  }

  async alarms(via: string): Promise<Alarm[]> {
    this.machine(via);
    return [...this.w.alarms];
  }

  async memberRemove(via: string, id: string): Promise<void> {
    this.machine(via);
    this.w.log.push(`etcd memberRemove ${id} via ${via}`);
    if (id === this.w.leaderId) throw new Error("refusing to remove the leader in this fake: move leadership first");
    this.w.members = this.w.members.filter((m) => m.id !== id);
  }

  async promoteLearner(via: string, id: string): Promise<void> {
    this.machine(via);
    this.w.log.push(`etcd promoteLearner ${id} via ${via}`);
    const m = this.w.members.find((x) => x.id === id);
    if (m) m.isLearner = false;
  }

  async moveLeader(leaderNode: string, targetId: string): Promise<void> {
    this.machine(leaderNode);
    this.w.log.push(`etcd moveLeader ${leaderNode} -> ${targetId}`);
    if (this.w.memberOf(leaderNode)?.id !== this.w.leaderId) throw new Error("not the leader");
    this.w.leaderId = targetId;
  }

  async snapshot(node: string): Promise<number> {
    this.machine(node);
    this.w.log.push(`etcd snapshot ${node}`);
    return 1 << 20;
  }
}

class FakeNodes implements NodeAccess {
  private readonly etcdEdge: FakeEtcd;
  unreachable = new Map<string, string>();
  constructor(private readonly w: FakeWorld) {
    this.etcdEdge = new FakeEtcd(w);
  }
  async sync(state: StackState | { endpoints: NodeEndpoint[] }): Promise<void> {
    this.unreachable = new Map(
      state.endpoints.filter((e) => !this.w.machines.get(e.name)?.up).map((e) => [e.name, "connection refused"]),
    );
  }
  async etcd(): Promise<EtcdEdge> {
    return this.etcdEdge;
  }
  async kube(): Promise<KubeEdge> {
    if (!this.w.kube) throw new Error("the fake cluster runs no Kubernetes");
    return new FakeKubeEdge(this.w);
  }
  async vip(): Promise<VipEdge> {
    const w = this.w;
    return {
      observe: async (address, nodes) => ({
        address,
        holders: w.vip?.holder && nodes.includes(w.vip.holder) ? [w.vip.holder] : [],
        unobserved: [],
        // keepalived's recorded state: the holder MASTER, every other running machine BACKUP.
        states: Object.fromEntries(
          nodes.map((n) => [
            n,
            n === w.vip?.holder
              ? "MASTER"
              : !w.machines.get(n)?.up || w.vip?.stopped.has(n)
                ? "STOP"
                : w.faults.vipNewNodesFault && w.machines.get(n)!.entry.image !== "lab-v1"
                  ? "FAULT"
                  : "BACKUP",
          ]),
        ),
      }),
      answers: async () => !!w.vip?.holder && !w.faults.vipNotAnswering,
      keepalived: async (node, _address, action) => {
        w.log.push(`keepalived ${action} ${node}`);
        if (!w.vip) return;
        if (action === "resume" && w.faults.vipResumeFails)
          throw new Error("keepalived resume: timed out after 60s waiting for keepalived to run");
        if (action === "release") w.vip.stopped.add(node);
        else w.vip.stopped.delete(node);
        if (action === "release" && w.vip.holder === node) w.vip.holder = undefined;
        if (action === "resume" && !w.vip.holder) w.vip.holder = node;
        w.electVip();
      },
    };
  }
  /** Commands on a machine are logged (an adopted node's reset); the machine must be up. */
  async run(node: string, command: string): Promise<string> {
    if (!this.w.machines.get(node)?.up) throw new Error(`${node}: connection refused`);
    // The certificate expiry script (orchestrator/edges/certs.ts): read-only, not logged.
    if (command.includes("openssl x509 -noout -enddate"))
      return (
        "/etc/kubernetes/pki/etcd/server.crt\t" +
        `notAfter=${this.w.certificates[node] ?? "Dec  1 00:00:00 2036 GMT"}\n`
      );
    this.w.log.push(`run ${node}: ${command}`);
    // An adopted node's reset (orchestrator/act/adopted.ts) says what it did.
    if (command.includes("echo wiped-secrets")) return "kubeadm-reset\nwiped-secrets\n";
    return "";
  }
  async resetKube(): Promise<void> {}
  async close(): Promise<void> {}
}

/** The load balancer of `w.lb`: a destroyed machine's target is gone with it (its attachment). */
class FakeLb implements LoadBalancerEdge {
  constructor(private readonly w: FakeWorld) {}
  private get targets(): Map<string, TargetState> {
    return this.w.lb!;
  }
  async observe(nodes: readonly NodeEndpoint[]): Promise<LoadBalancerObservation> {
    const out: LoadBalancerObservation = { name: "fake LB", targets: {}, drainSeconds: 1 };
    for (const n of nodes) {
      // Machines made before the test set the load balancer are in it.
      const t = this.w.machines.has(n.name) ? (this.targets.get(n.name) ?? "healthy") : "unused";
      out.targets[n.name] = { state: t };
      // A deregistration drains for one observation.
      if (t === "draining") this.targets.set(n.name, "unused");
    }
    return out;
  }
  async deregister(node: NodeEndpoint): Promise<void> {
    this.w.log.push(`lb deregister ${node.name}`);
    this.targets.set(node.name, "draining");
    if (this.w.faults.crashAfterDeregister) {
      this.w.faults.crashAfterDeregister = false;
      throw new Error("killed (simulated crash of molt)");
    }
  }
  async register(node: NodeEndpoint): Promise<void> {
    this.w.log.push(`lb register ${node.name}`);
    this.targets.set(node.name, "healthy");
  }
}

/** The etcd edge over `w` alone (adoption's ownership claim). */
export function fakeEtcd(w: FakeWorld): EtcdEdge {
  return new FakeEtcd(w);
}

/** Edges over `w` for rollout({ edges }). */
export function fakeEdges(w: FakeWorld): EdgeFactory {
  return async (o) => ({
    stack: new FakeStack(w, o.stackName),
    nodes: new FakeNodes(w),
    ...(w.lb ? { lb: new FakeLb(w) } : {}),
  });
}
