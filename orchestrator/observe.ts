// Observation: everything the planner needs, read once per pass into one World. The same
// function serves `rollout`, `plan` and `status`.
import type { EtcdAccess } from "./edges/etcd";
import { observeCertificates } from "./edges/certs";
import { KubeAccess, type ComponentHealth, type KubeObservation } from "./edges/kube";
import type { Edges, EtcdEdge, KubeEdge } from "./edges/types";
import type { EtcdObservation, Intent, Member, NodeEntry, StatusResult, World, WorldMemory } from "./model";

/** Reads the stack state, etcd and (when the intent runs Kubernetes) the Kubernetes control plane. */
export async function observe(edges: Edges, intent: Intent, memory: WorldMemory): Promise<World> {
  const state = await edges.stack.state();
  const world: World = {
    intent,
    nodes: state.nodes,
    endpoints: state.endpoints,
    orphans: state.orphans,
    ...memory,
  };
  if (state.nodes.length === 0) return world;
  let etcd: EtcdEdge | undefined;
  try {
    await edges.nodes.sync(state);
    etcd = await edges.nodes.etcd();
    world.etcd = await observeEtcd(etcd, state.nodes, edges.nodes.unreachable);
  } catch (e) {
    world.etcdError = (e as Error).message;
  }
  // molt:rollout.replaceCertificatesExpiringWithinDays: each node's first certificate to expire.
  const days = intent.rollout.replaceCertificatesExpiringWithinDays;
  if (days !== undefined && etcd)
    world.certificates = await observeCertificates(edges.nodes, state.nodes, days, Date.now());
  // The API endpoint VIP (molt:apiEndpoint mode vip): which node holds it.
  if (intent.vip && etcd && edges.nodes.vip) {
    world.vip = await (
      await edges.nodes.vip()
    ).observe(
      intent.vip.address,
      state.nodes.map((n) => n.name),
    );
  }
  if (intent.kubernetesVersion === undefined) return world;
  if (!etcd) {
    world.kubeError = world.etcdError ?? "no SSH access to the nodes";
    return world;
  }
  try {
    world.kube = await observeKube(await edges.nodes.kube(), state.nodes);
  } catch (e) {
    world.kubeError = (e as Error).message.split("\n")[0];
    await edges.nodes.resetKube();
  }
  return world;
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
      const [members, alarms]: [Member[], Awaited<ReturnType<EtcdEdge["alarms"]>>] = await Promise.all([
        access.memberList(v.name),
        access.alarms(v.name),
      ]);
      return { members, status, alarms };
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

/** Every node's components through its own tunnels; the cluster through the newest ready API server. */
export async function observeKube(kube: KubeEdge, nodes: NodeEntry[]): Promise<KubeObservation> {
  const components: Record<string, ComponentHealth> = {};
  await Promise.all(nodes.map(async (n) => void (components[n.name] = await kube.components(n.name))));
  const via = [...nodes]
    .sort((a, b) => b.generation - a.generation)
    .find((n) => components[n.name]?.apiserver.ok)?.name;
  if (!via)
    throw new Error(
      `no kube-apiserver is ready ` +
        `(${nodes.map((n) => `${n.name}: ${components[n.name]?.apiserver.error}`).join("; ")})`,
    );
  return { via, components, ...(await kube.observeCluster(via)) };
}

export type { Intent };
