// Observation: everything the planner needs, read once per pass into one World. The same
// function serves `rollout`, `plan` and `status`.
import type { EtcdAccess } from "./edges/etcd";
import { observeCertificates } from "./edges/certs";
import { KubeAccess } from "./edges/kube";
import { type ComponentHealth, type KubeNode, type KubeObservation } from "./core/observations";
import type { Edges, EtcdEdge, KubeEdge, LoadBalancerEdge, NodeAccess, VipEdge } from "./core/edges";
import type { NodeEndpoint } from "./core/nodes";
import type { HostFile } from "./core/host-files";
import { shellQuote } from "../infra/remote/ssh";
import type {
  ClusterVersionResult,
  EtcdObservation,
  HostFilesObservation,
  Intent,
  Member,
  NodeEntry,
  StatusResult,
  World,
  WorldMemory,
} from "./core/model";
import { ownerReadOf, type ClusterOwner } from "./core/ownership";

/**
 * Reads the stack state, etcd and (when the intent runs Kubernetes) the Kubernetes control plane;
 * with `self`, the cluster's ownership marker too (World.ownership).
 */
export async function observe(edges: Edges, intent: Intent, memory: WorldMemory, self?: ClusterOwner): Promise<World> {
  const state = await edges.stack.state();
  const world: World = {
    intent,
    nodes: state.nodes,
    endpoints: state.endpoints,
    orphans: state.orphans,
    ...memory,
  };
  if (state.nodes.length === 0) return world;
  let etcd: EtcdEdge;
  try {
    await edges.nodes.sync(state);
    etcd = await edges.nodes.etcd();
  } catch (e) {
    world.etcdError = (e as Error).message;
    if (intent.kubernetesVersion !== undefined) world.kubeError = world.etcdError;
    return world;
  }
  // The reads below are independent of each other (each through the nodes' own sessions and
  // tunnels), so they run at once: a pass costs its slowest read, not their sum.
  const days = intent.rollout.replaceCertificatesExpiringWithinDays;
  const { vip } = intent;
  const reads = await Promise.allSettled([
    observeEtcd(etcd, state.nodes, edges.nodes.unreachable).then(
      (o) => void (world.etcd = o),
      (e: unknown) => void (world.etcdError = (e as Error).message),
    ),
    // Which stack owns the cluster (core/ownership.ts); a failed read is the planner's to judge.
    self &&
      etcd.readOwner().then(
        (r) => void (world.ownership = { self, marker: ownerReadOf(r) }),
        (e: unknown) =>
          void (world.ownership = { self, marker: { kind: "unobserved", error: (e as Error).message.split("\n")[0] } }),
      ),
    // molt:rollout.replaceCertificatesExpiringWithinDays: each node's first certificate to expire.
    days !== undefined &&
      observeCertificates(edges.nodes, state.nodes, days, Date.now()).then((c) => void (world.certificates = c)),
    // The API load balancer's view of each node's target (plan/endpoint.ts).
    edges.lb && observeLb(edges.lb, state.endpoints, state.nodes, world),
    // The API endpoint VIP (molt:apiEndpoint mode vip): which node holds it.
    vip && edges.nodes.vip?.().then((v) => observeVip(v, vip.address, state.nodes, world)),
    intent.kubernetesVersion !== undefined &&
      edges.nodes
        .kube()
        .then((k) => observeKube(k, state.nodes))
        .then(
          async (k) => {
            world.kube = k;
            if (k.hostFiles) world.hostFiles = await observeHostFiles(edges.nodes, state.nodes, k.hostFiles);
          },
          async (e: unknown) => {
            world.kubeError = (e as Error).message.split("\n")[0];
            await edges.nodes.resetKube();
          },
        ),
  ]);
  // Every read has finished (none goes on in the background); the first failure is the pass's.
  const failed = reads.find((r) => r.status === "rejected");
  if (failed) throw failed.reason;
  return world;
}

/** A load balancer that cannot be asked leaves every target unobserved (the planner waits, then refuses). */
async function observeLb(
  edge: LoadBalancerEdge,
  endpoints: NodeEndpoint[],
  nodes: NodeEntry[],
  world: World,
): Promise<void> {
  const listed = endpoints.filter((e) => nodes.some((n) => n.name === e.name));
  try {
    world.lb = await edge.observe(listed);
  } catch (e) {
    const error = (e as Error).message.split("\n")[0];
    world.lb = {
      name: "the API load balancer",
      targets: Object.fromEntries(nodes.map((n) => [n.name, { error }])),
      drainSeconds: 0,
    };
  }
}

async function observeVip(edge: VipEdge, address: string, nodes: NodeEntry[], world: World): Promise<void> {
  world.vip = await edge.observe(
    address,
    nodes.map((n) => n.name),
  );
}

export async function observeEtcd(
  access: EtcdEdge,
  nodes: NodeEntry[],
  unreachable: ReadonlyMap<string, string>,
): Promise<EtcdObservation> {
  const status: Record<string, StatusResult> = {};
  await Promise.all(
    nodes.map(async (n) => {
      const why = unreachable.get(n.name);
      if (why !== undefined) {
        status[n.name] = { ok: false, error: `unreachable over SSH: ${why}`, unreachable: true };
        return;
      }
      try {
        status[n.name] = { ok: true, status: await access.status(n.name) };
      } catch (e) {
        status[n.name] = { ok: false, error: (e as Error).message.split("\n")[0] };
      }
    }),
  );
  // Members and alarms from a voter that answered (learners reject these calls).
  const voters = nodes.filter((n) => {
    const s = status[n.name];
    return s?.ok && !s.status.isLearner;
  });
  let lastError: unknown;
  for (const v of voters) {
    try {
      const [members, alarms, clusterVersion]: [
        Member[],
        Awaited<ReturnType<EtcdEdge["alarms"]>>,
        ClusterVersionResult,
      ] = await Promise.all([
        access.memberList(v.name),
        access.alarms(v.name),
        // Unread, it is the planner's to judge (plan/cluster-version.ts), not this pass's failure.
        access.clusterVersion(v.name).then(
          (version): ClusterVersionResult => ({ ok: true, version, via: v.name }),
          (e: unknown): ClusterVersionResult => ({ ok: false, error: (e as Error).message.split("\n")[0] }),
        ),
      ]);
      return { members, status, alarms, clusterVersion };
    } catch (e) {
      lastError = e;
    }
  }
  throw new Error(
    `no voting member answered member list: ${lastError ? (lastError as Error).message : "no reachable voter"}`,
  );
}

/** Opens the Kubernetes edge over an etcd edge's SSH sessions (tools and tests). */
export async function openKube(access: EtcdAccess): Promise<KubeAccess> {
  return KubeAccess.open(access.sessions);
}

/** The node each Kubernetes edge's last pass read the cluster through (observeKube). */
const lastVia = new WeakMap<KubeEdge, string>();

/**
 * Every node's components through its own tunnels; the cluster through the newest ready API
 * server. That is almost always the node the last pass read it through, so the cluster is
 * read through that one while the components are: kept only when the components name it
 * (its reads are the pass's), else read again through the one they name (a failed early
 * read too). A pass costs the slower of the two reads, not their sum. Only the last pass's
 * node is asked early: a node whose API server hangs is asked so once, not on every pass.
 */
export async function observeKube(kube: KubeEdge, nodes: NodeEntry[]): Promise<KubeObservation> {
  const components: Record<string, ComponentHealth> = {};
  const byAge = [...nodes].sort((a, b) => b.generation - a.generation);
  const last = lastVia.get(kube);
  const guess = last !== undefined && nodes.some((n) => n.name === last) ? last : byAge[0]?.name;
  const early = guess
    ? kube.observeCluster(guess).then(
        (cluster) => ({ cluster }),
        () => undefined, // read again below if it is the one
      )
    : undefined;
  await Promise.all(nodes.map(async (n) => void (components[n.name] = await kube.components(n.name))));
  const via = byAge.find((n) => components[n.name]?.apiserver.ok)?.name;
  if (!via)
    throw new Error(
      `no kube-apiserver is ready ` +
        `(${nodes.map((n) => `${n.name}: ${components[n.name]?.apiserver.error}`).join("; ")})`,
    );
  lastVia.set(kube, via);
  const read = via === guess ? await early : undefined;
  return { via, components, ...(read?.cluster ?? (await kube.observeCluster(via))) };
}

export type { Intent };

/** Which of the carried host files each node lacks (`test -e` as root, one command per node). */
export async function observeHostFiles(
  access: Pick<NodeAccess, "run" | "unreachable">,
  nodes: NodeEntry[],
  files: HostFile[],
): Promise<HostFilesObservation> {
  const carried = files.filter((f) => f.action === "copy").map((f) => f.path);
  const lacking: HostFilesObservation["lacking"] = {};
  const script = `for p in ${carried.map(shellQuote).join(" ")}; do [ -e "$p" ] || printf '%s\\n' "$p"; done`;
  await Promise.all(
    nodes.map(async (n) => {
      const why = access.unreachable.get(n.name);
      if (why !== undefined) return void (lacking[n.name] = { error: `unreachable over SSH: ${why}` });
      try {
        const out = await access.run(n.name, `SUDO sh -c ${shellQuote(script)}`, "checking the cluster's host files");
        lacking[n.name] = out.split("\n").filter((l) => l !== "");
      } catch (e) {
        lacking[n.name] = { error: (e as Error).message.split("\n")[0] };
      }
    }),
  );
  return { files, lacking };
}

/**
 * Between two full passes of a wait on one node (its join, its health): etcd again (every
 * member's status and the member list: what a join waits for), and with Kubernetes that
 * node's components and Node, through the API server the last pass read the cluster
 * through. Everything else is the last pass's. A read that fails leaves its part unobserved
 * (with the error), so the decision on this world changes and the caller observes fully.
 */
export async function reobserveNode(edges: Edges, world: World, node: string): Promise<World> {
  const next: World = { ...world };
  const etcd = await edges.nodes.etcd();
  const kube = world.kube;
  await Promise.all([
    observeEtcd(etcd, world.nodes, edges.nodes.unreachable).then(
      (o) => void (next.etcd = o),
      (e: unknown) => ((next.etcd = undefined), (next.etcdError = (e as Error).message)),
    ),
    kube &&
      edges.nodes
        .kube()
        .then(async (k) => {
          const [components, n] = await Promise.all([k.components(node), k.readNode(kube.via, node)]);
          next.kube = withNode(kube, node, components, n);
        })
        .catch((e: unknown) => ((next.kube = undefined), (next.kubeError = (e as Error).message.split("\n")[0]))),
  ]);
  return next;
}

/** Between two full passes of a wait on the load balancer (a new node healthy in it): its targets alone. */
export async function reobserveLb(edges: Edges, world: World): Promise<World> {
  if (!edges.lb) return world;
  const state = await edges.stack.state();
  const next: World = { ...world };
  await observeLb(edges.lb, state.endpoints, state.nodes, next);
  return next;
}

/** Between two full passes of the wait for kube-proxy's rollout: its DaemonSet alone. */
export async function reobserveAddons(edges: Edges, world: World): Promise<World> {
  const kube = world.kube;
  if (!kube) return world;
  try {
    const kubeProxy = await (await edges.nodes.kube()).readKubeProxy(kube.via);
    const { kubeProxy: _old, ...rest } = kube;
    return { ...world, kube: { ...rest, ...(kubeProxy ? { kubeProxy } : {}) } };
  } catch (e) {
    return { ...world, kube: undefined, kubeError: (e as Error).message.split("\n")[0] };
  }
}

/** `kube` with one node's components and Node replaced (its Lease age kept: a full pass reads Leases). */
export function withNode(
  kube: KubeObservation,
  node: string,
  components: ComponentHealth,
  n: Omit<KubeNode, "leaseAgeSeconds"> | undefined,
): KubeObservation {
  const old = kube.nodes.find((x) => x.name === node);
  const others = kube.nodes.filter((x) => x.name !== node);
  const age = old?.leaseAgeSeconds;
  return {
    ...kube,
    components: { ...kube.components, [node]: components },
    nodes: n ? [...others, { ...n, ...(age !== undefined ? { leaseAgeSeconds: age } : {}) }] : others,
  };
}
