// molt's Kubernetes edge. Like etcd, the API is reached through SSH tunnels to each
// node's loopback ports, so it works the same behind a private load balancer on any
// cloud and in the lab:
//   - per node: kube-apiserver /readyz and /version (verified against the cluster CA),
//     kube-controller-manager /healthz (10257) and kube-scheduler /livez (10259), the
//     endpoints `kubeadm init/join` itself waits for;
//   - cluster-wide calls (@kubernetes/client-node) go to one node's API server, preferring
//     the newest ready one, as cluster-admin with the credentials of /etc/kubernetes/admin.conf
//     read over SSH once and held in memory only.
import type { ComponentHealth, KubeNode, KubeObservation } from "../core/observations";
import type { Eviction } from "../core/edges";
import { isEvictable, type PodLike } from "../core/drain";
import { clusterConfigRefs, clusterConfigurationAt } from "../../infra/kubeadm/cluster-config";
import { hostFilesOf, type HostFile } from "../core/host-files";
import { parse as parseYaml, stringify as stringifyYaml } from "yaml";
import type { SshSession } from "../../infra/remote/ssh";
import { sudoFor, type TlsClientCredentials } from "./etcd";
import { pollUntil } from "../../lib/poll";
import { Agent } from "node:https";
import type { SessionPool } from "./sessions";
import {
  APISERVER,
  CONTROLLERS,
  manifestPath,
  manifestsOf,
  readManifestsCommand,
  retiredManifestsOf,
  retiredPath,
  securePortOf,
  staticPodOfRetired,
  stillRunning,
  stillRunningScript,
  type StaticPod,
  type Watched,
} from "./static-pods";

import {
  apiClientsOver,
  credentialsOf,
  describe,
  evictionMessage,
  get,
  k8s,
  LEADER_LEASES,
  notFound,
  releasedLease,
  stripV,
  tagVersion,
} from "./kube-support";

export { credentialsOf, stripV, tagVersion };

export const CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane";

interface Ports {
  apiserver: number;
  controllerManager: number;
  scheduler: number;
  /**
   * Kept-alive connections through the tunnels: `admin` for the API calls (it holds the admin
   * credentials), `health` for the health reads. Each new connection costs an SSH channel and a
   * TLS handshake; a pass makes about ten calls per node.
   */
  agents: { admin: Agent; health: Agent };
  close: () => Promise<void>;
}

/**
 * How long an idle kept-alive connection is kept: well inside kube-apiserver's own idle
 * timeout (90 s), so the server does not close one just as a call goes out on it.
 */
const IDLE_CONNECTION_MS = 30_000;

interface NodeObject {
  metadata?: { name?: string; labels?: Record<string, string> };
  spec?: { unschedulable?: boolean };
  status?: { conditions?: { type: string; status: string }[]; nodeInfo?: { kubeletVersion?: string } };
}

export function kubeNodeOf(n: NodeObject): Omit<KubeNode, "leaseAgeSeconds"> {
  return {
    name: n.metadata?.name ?? "",
    ready: n.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false,
    unschedulable: !!n.spec?.unschedulable,
    controlPlane: n.metadata?.labels?.[CONTROL_PLANE_LABEL] !== undefined,
    kubeletVersion: stripV(n.status?.nodeInfo?.kubeletVersion ?? ""),
  };
}

interface DaemonSetObject {
  metadata?: { generation?: number };
  spec?: { template: { spec?: { containers: { name: string; image?: string }[] } } };
  status?: {
    observedGeneration?: number;
    updatedNumberScheduled?: number;
    desiredNumberScheduled: number;
    numberAvailable?: number;
  };
}

/** kube-proxy's version (its image tag) and whether its DaemonSet has rolled out; undefined without its container. */
export function kubeProxyOf(ds: DaemonSetObject): KubeObservation["kubeProxy"] {
  const image = ds.spec?.template.spec?.containers.find((c) => c.name === "kube-proxy")?.image;
  if (!image) return undefined;
  const st = ds.status;
  const rolledOut =
    (ds.metadata?.generation ?? 0) <= (st?.observedGeneration ?? 0) &&
    (st?.updatedNumberScheduled ?? 0) === (st?.desiredNumberScheduled ?? 0) &&
    (st?.numberAvailable ?? 0) === (st?.desiredNumberScheduled ?? 0);
  return { version: tagVersion(image), rolledOut };
}

export class KubeUnreachableError extends Error {
  constructor(detail: string) {
    super(`the Kubernetes API is not reachable: ${detail}`);
    this.name = "KubeUnreachableError";
  }
}

export class KubeAccess {
  private readonly ports = new Map<string, Ports>();

  private constructor(
    private readonly pool: SessionPool,
    private readonly credentials: TlsClientCredentials,
  ) {
    pool.onDrop((node) => {
      const p = this.ports.get(node);
      this.ports.delete(node);
      // Not awaited: onDrop is synchronous, and close() never rejects (it stops local listeners).
      void p?.close();
    });
  }

  /** The Kubernetes edge over the pool's sessions; reads the admin credentials from the first node that has them. */
  static async open(pool: SessionPool): Promise<KubeAccess> {
    const errors: string[] = [];
    for (const node of pool.nodes()) {
      const ssh = pool.get(node)!;
      const r = await ssh.exec(`${sudoFor(ssh.target.user)}cat /etc/kubernetes/admin.conf`);
      if (r.code !== 0) {
        errors.push(`${node}: ${r.stderr.trim() || `exit ${r.code}`}`);
        continue;
      }
      const credentials = credentialsOf(r.stdout);
      if (credentials) return new KubeAccess(pool, credentials);
      errors.push(`${node}: admin.conf has no client certificate`);
    }
    throw new KubeUnreachableError(
      `no node has a usable /etc/kubernetes/admin.conf (${errors.join("; ") || "no nodes"})`,
    );
  }

  /** Tunnels being opened, shared by every caller meanwhile (a pass reads components and the cluster at once). */
  private readonly opening = new Map<string, Promise<Ports>>();

  /** Set by close(): tunnels that finish opening after it are closed at once, not kept. */
  private closed = false;

  private async portsOf(node: string): Promise<Ports> {
    const have = this.ports.get(node);
    if (have) return have;
    const pending = this.opening.get(node);
    if (pending) return pending;
    const ssh = this.pool.get(node);
    if (!ssh) throw new KubeUnreachableError(`no SSH session to ${node}`);
    const opening = (async (): Promise<Ports> => {
      const forwards = await Promise.allSettled([
        ssh.forward("127.0.0.1", 6443),
        ssh.forward("127.0.0.1", 10257),
        ssh.forward("127.0.0.1", 10259),
      ]);
      const opened = forwards.flatMap((f) => (f.status === "fulfilled" ? [f.value] : []));
      const closeAll = async () => void (await Promise.all(opened.map((f) => f.close())));
      const failed = forwards.find((f) => f.status === "rejected");
      if (failed) {
        await closeAll();
        throw failed.reason;
      }
      // Closed, or the node's session dropped, while they opened: not kept (nothing would close them).
      if (this.closed || this.pool.get(node) !== ssh) {
        await closeAll();
        throw new KubeUnreachableError(`the tunnels to ${node} opened after its session or this edge closed`);
      }
      const [a, c, s] = opened;
      const keep = { keepAlive: true, timeout: IDLE_CONNECTION_MS };
      const { ca, cert, key } = this.credentials;
      const agents = {
        // kubeadm's serving certificate names "kubernetes" on every API server.
        admin: new Agent({ ...keep, ca, cert, key, servername: "kubernetes" }),
        health: new Agent(keep),
      };
      const p: Ports = {
        apiserver: a.port,
        controllerManager: c.port,
        scheduler: s.port,
        agents,
        close: async () => {
          agents.admin.destroy();
          agents.health.destroy();
          await closeAll();
        },
      };
      this.ports.set(node, p);
      return p;
    })().finally(() => this.opening.delete(node));
    this.opening.set(node, opening);
    return opening;
  }

  /** The health of one node's control-plane components. */
  async components(node: string): Promise<ComponentHealth> {
    let p: Ports;
    try {
      p = await this.portsOf(node);
    } catch (e) {
      const error = (e as Error).message;
      return {
        apiserver: { ok: false, error },
        controllerManager: { ok: false, error },
        scheduler: { ok: false, error },
      };
    }
    // kubeadm's serving certificate names "kubernetes" on every API server.
    const tls = { ca: this.credentials.ca, servername: "kubernetes" };
    const agent = p.agents.health;
    const [ready, version, kcm, sched] = await Promise.all([
      get(p.apiserver, "/readyz", tls, agent),
      get(p.apiserver, "/version", tls, agent),
      // Their serving certificates are self-signed by default; no credentials are sent.
      get(p.controllerManager, "/healthz", { insecure: true }, agent),
      get(p.scheduler, "/livez", { insecure: true }, agent),
    ]);
    const healthy = ready.status === 200 && kcm.status === 200 && sched.status === 200;
    const retiredManifests = healthy ? [] : await this.retiredManifests(node);
    let gitVersion: string | undefined;
    try {
      gitVersion =
        version.status === 200 ? (JSON.parse(version.body) as { gitVersion?: string }).gitVersion : undefined;
    } catch {
      gitVersion = undefined;
    }
    return {
      apiserver:
        ready.status === 200
          ? { ok: true, ...(gitVersion ? { version: stripV(gitVersion) } : {}) }
          : { ok: false, error: describe(ready) },
      controllerManager: kcm.status === 200 ? { ok: true } : { ok: false, error: describe(kcm) },
      scheduler: sched.status === 200 ? { ok: true } : { ok: false, error: describe(sched) },
      ...(retiredManifests.length ? { retiredManifests } : {}),
    };
  }

  /** The manifests stop-apiserver moved aside on `node` (none when it cannot be asked: the health says why). */
  private async retiredManifests(node: string): Promise<string[]> {
    const ssh = this.pool.get(node);
    if (!ssh) return [];
    const r = await ssh
      .exec(`${sudoFor(ssh.target.user)}sh -c 'ls -1 ${retiredPath("*")} 2>/dev/null || true'`)
      .catch(() => undefined);
    return r?.code === 0 ? retiredManifestsOf(r.stdout) : [];
  }

  /** API clients for the API server of `node`, through its tunnel, over its kept-alive connections. */
  async api(node: string) {
    const m = await k8s();
    const p = await this.portsOf(node);
    return { ...apiClientsOver(m, `https://127.0.0.1:${p.apiserver}`, p.agents.admin), m };
  }

  /** Nodes, leases, evictable pods, kubeadm-config and kube-proxy, through `via`. */
  async observeCluster(via: string): Promise<Omit<KubeObservation, "components" | "via">> {
    const { core, apps, coord } = await this.api(via);
    const [nodes, leases, pods, cm, proxy] = await Promise.all([
      core.listNode(),
      coord.listNamespacedLease({ namespace: "kube-node-lease" }),
      core.listPodForAllNamespaces(),
      core.readNamespacedConfigMap({ name: "kubeadm-config", namespace: "kube-system" }).catch(notFound),
      apps.readNamespacedDaemonSet({ name: "kube-proxy", namespace: "kube-system" }).catch(notFound),
    ]);
    const now = Date.now();
    const leaseAge = new Map(
      leases.items.map((l) => [
        l.metadata?.name ?? "",
        l.spec?.renewTime ? (now - new Date(l.spec.renewTime).getTime()) / 1000 : undefined,
      ]),
    );
    const evictable: Record<string, number> = {};
    for (const p of pods.items) {
      const node = p.spec?.nodeName;
      if (!node || !isEvictable(p)) continue;
      evictable[node] = (evictable[node] ?? 0) + 1;
    }
    let clusterConfigVersion: string | undefined;
    let hostFiles: HostFile[] | undefined;
    let encryptionProviderConfig: string | undefined;
    const cc = cm?.data?.ClusterConfiguration;
    if (cc) {
      const parsed = parseYaml(cc) as { kubernetesVersion?: string } | null;
      if (parsed?.kubernetesVersion) clusterConfigVersion = stripV(parsed.kubernetesVersion);
      const refs = clusterConfigRefs(parsed);
      hostFiles = hostFilesOf(refs);
      encryptionProviderConfig = refs.apiServer.extraArgs["encryption-provider-config"];
    }
    const kubeProxy = proxy ? kubeProxyOf(proxy) : undefined;
    return {
      nodes: nodes.items.map((n) => {
        const age = leaseAge.get(n.metadata?.name ?? "");
        return { ...kubeNodeOf(n), ...(age !== undefined ? { leaseAgeSeconds: age } : {}) };
      }),
      evictable,
      ...(clusterConfigVersion ? { clusterConfigVersion } : {}),
      ...(hostFiles?.length ? { hostFiles } : {}),
      ...(encryptionProviderConfig ? { encryptionProviderConfig } : {}),
      ...(kubeProxy ? { kubeProxy } : {}),
    };
  }

  /** kube-proxy's DaemonSet, as observeCluster reads it (the addons wait between full passes). */
  async readKubeProxy(via: string): Promise<KubeObservation["kubeProxy"]> {
    const { apps } = await this.api(via);
    const ds = await apps.readNamespacedDaemonSet({ name: "kube-proxy", namespace: "kube-system" }).catch(notFound);
    return ds ? kubeProxyOf(ds) : undefined;
  }

  /** One Node, as observeCluster reads it (without its Lease); undefined when there is none. */
  async readNode(via: string, name: string): Promise<Omit<KubeNode, "leaseAgeSeconds"> | undefined> {
    const { core } = await this.api(via);
    const n = await core.readNode({ name }).catch(notFound);
    return n && kubeNodeOf(n);
  }

  /**
   * Sets kubeadm-config's ClusterConfiguration.kubernetesVersion, as Cluster API's
   * KubeadmControlPlane does before the first machine of a new version joins (kubeadm join
   * reads it). An optimistic-concurrency update: a conflict fails the step and the next
   * pass looks again.
   */
  async setClusterConfigVersion(via: string, version: string): Promise<void> {
    const { core } = await this.api(via);
    const cm = await core.readNamespacedConfigMap({ name: "kubeadm-config", namespace: "kube-system" });
    const cc = (parseYaml(cm.data?.ClusterConfiguration ?? "") ?? {}) as Record<string, unknown>;
    cm.data = { ...cm.data, ClusterConfiguration: stringifyYaml(clusterConfigurationAt(cc, stripV(version))) };
    await core.replaceNamespacedConfigMap({ name: "kubeadm-config", namespace: "kube-system", body: cm });
  }

  /** Marks a node schedulable again (idempotent). */
  async uncordon(via: string, node: string): Promise<void> {
    const { core, m } = await this.api(via);
    await core.patchNode(
      { name: node, body: { spec: { unschedulable: false } } },
      m.setHeaderOptions("Content-Type", m.PatchStrategy.MergePatch),
    );
  }

  /** Marks a node unschedulable (idempotent). */
  async cordon(via: string, node: string): Promise<void> {
    const { core, m } = await this.api(via);
    await core.patchNode(
      { name: node, body: { spec: { unschedulable: true } } },
      m.setHeaderOptions("Content-Type", m.PatchStrategy.MergePatch),
    );
  }

  /** The pods scheduled on `node`, as the API lists them; which a drain evicts is core/drain.ts's. */
  async podsOn(via: string, node: string): Promise<PodLike[]> {
    const { core } = await this.api(via);
    return (await core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${node}` })).items;
  }

  /**
   * One eviction through the Eviction API (PodDisruptionBudgets honoured): "gone" when the pod
   * is not there any more (404), "refused" with the API's reason when a budget forbids it now (429).
   */
  async evict(via: string, namespace: string, name: string): Promise<Eviction> {
    const { core } = await this.api(via);
    try {
      await core.createNamespacedPodEviction({
        name,
        namespace,
        body: { apiVersion: "policy/v1", kind: "Eviction", metadata: { name, namespace } },
      });
      return { kind: "evicted" };
    } catch (e) {
      const code = (e as { code?: number }).code;
      if (code === 404) return { kind: "gone" };
      if (code === 429) return { kind: "refused", message: evictionMessage(e) };
      throw e;
    }
  }

  /**
   * Deletes the Node of a machine that is gone, then the pods still bound to it, at once
   * (grace 0, each by its UID): no kubelet is left to confirm their deletion. Left to the pod
   * garbage collector they go only after its 40 s quarantine, and until then a DaemonSet's
   * rolling update counts the node's pod as unavailable: kube-proxy's rollout after an
   * upgrade waited for the last retired node's pod.
   */
  async deleteNode(via: string, node: string, o: { machineGone?: boolean } = {}): Promise<string[]> {
    const { core } = await this.api(via);
    await core.deleteNode({ name: node }).catch(notFound);
    // Only for a machine molt destroyed: a machine merely unreachable (an adopted one) may still
    // run its pods, and a StatefulSet's pod deleted at once there would run twice.
    if (!o.machineGone) return [];
    // The Node is gone: whatever fails now is left to the pod garbage collector, and said.
    const pods = await core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${node}` }).catch((e: Error) => e);
    if (pods instanceof Error) return [`listing its pods failed: ${firstLine(pods)}`];
    const left = await Promise.all(
      pods.items.map((p) =>
        core
          .deleteNamespacedPod({
            name: p.metadata?.name ?? "",
            namespace: p.metadata?.namespace ?? "",
            gracePeriodSeconds: 0,
            body: { gracePeriodSeconds: 0, preconditions: { uid: p.metadata?.uid } },
          })
          .then(
            () => undefined,
            (e: unknown) =>
              // Gone already (404), or a new pod of that name (409: another UID): not this node's.
              (e as { code?: number }).code === 404 || (e as { code?: number }).code === 409
                ? undefined
                : `${p.metadata?.namespace}/${p.metadata?.name}: ${firstLine(e as Error)}`,
          ),
      ),
    );
    return left.filter((l): l is string => !!l);
  }

  /** Sets the image of one container of a DaemonSet or Deployment in kube-system. */
  async setImage(
    via: string,
    kind: "DaemonSet" | "Deployment",
    name: string,
    container: string,
    image: string,
  ): Promise<boolean> {
    const { apps, m } = await this.api(via);
    const patch = { spec: { template: { spec: { containers: [{ name: container, image }] } } } };
    const opts = m.setHeaderOptions("Content-Type", m.PatchStrategy.StrategicMergePatch);
    try {
      if (kind === "DaemonSet")
        await apps.patchNamespacedDaemonSet({ name, namespace: "kube-system", body: patch }, opts);
      else await apps.patchNamespacedDeployment({ name, namespace: "kube-system", body: patch }, opts);
      return true;
    } catch (e) {
      if ((e as { code?: number }).code === 404) return false;
      throw e;
    }
  }

  private session(node: string): SshSession {
    const ssh = this.pool.get(node);
    if (!ssh) throw new KubeUnreachableError(`no SSH session to ${node}`);
    return ssh;
  }

  /**
   * Stops a retiring node's control plane the way its kubelet would, each static pod's
   * manifest moved aside (the kubelet sends SIGTERM):
   *   1. kube-controller-manager and kube-scheduler first, while their API server still
   *      serves. Once they are gone (static-pods.ts: no process of theirs, nothing on the
   *      ports their manifests name), the leader Leases this node still holds are handed on
   *      (releasedLease): a node destroyed while leading would otherwise leave the cluster
   *      without controllers (CSR approval, DaemonSets) for the lease's 15 s plus a retry,
   *      after every retirement.
   *   2. kube-apiserver: /readyz fails at once while requests are still served for
   *      --shutdown-delay-duration, the load balancer's check drops it, and it stops
   *      listening. Done then: its process lingers while long-running requests (watches) stay
   *      open on it, until its shutdown ends or the kubelet kills it at the pod's grace period
   *      (30 s for kubeadm's own manifests, the delay + its request timeout + 5 s on the nodes
   *      molt makes: infra/kubeadm/grace.ts; on the lab, 1.37 logged "Stopped listening" 4 s
   *      after SIGTERM and was SIGKILLed 26 s later, each retirement). It accepts no connection then, its controllers
   *      have stopped and it is out of the load balancer (deregistered and drained before);
   *      requests it accepted before (direct clients only) finish or fail against its member's
   *      removal, and its open watches get no event until it or its machine goes, as when
   *      Cluster API deletes a machine. Its port is read from its manifest; with none, its
   *      process decides.
   */
  async stopApiServer(node: string, deadlineSeconds: number, signal?: AbortSignal): Promise<string[]> {
    const ssh = this.session(node);
    const sudo = sudoFor(ssh.target.user);
    const manifests = manifestsOf(
      await ssh.run(
        `${sudo}sh -c '${readManifestsCommand([...CONTROLLERS, APISERVER])}'`,
        `reading ${node}'s control-plane manifests`,
      ),
    );
    // The API server is gone for the cluster once its port is closed: its process lingers while
    // watches are open on it (below). With no port to watch (--secure-port=0), its process decides.
    const watched = (pods: readonly StaticPod[]) =>
      pods.map((p) => {
        const port = securePortOf(manifests[p.name], p.defaultPort);
        return { binary: p.name, port, process: p !== APISERVER || port === undefined };
      });
    const aside = (pods: readonly StaticPod[]) =>
      pods
        .map((p) => `if [ -f ${manifestPath(p.name)} ]; then mv ${manifestPath(p.name)} ${retiredPath(p.name)}; fi`)
        .join("; ");
    const gone = (pods: readonly StaticPod[], what: string) =>
      untilGone(ssh, watched(pods), {
        what:
          `${what} on ${node} to stop after ${pods.length > 1 ? "their manifests were" : "its manifest was"} ` +
          "moved aside",
        deadlineSeconds,
        signal,
      });
    await ssh.run(
      `${sudo}sh -c '${aside(CONTROLLERS)}'`,
      `moving ${node}'s kube-controller-manager and kube-scheduler manifests aside`,
    );
    await gone(CONTROLLERS, "kube-controller-manager and kube-scheduler");
    // Only a shortcut (the Leases expire in 15 s): a failure to hand one on is said, not fatal.
    const warnings = await this.releaseLeaderLeases(node).then(
      () => [],
      (e: Error) => [`the leader Leases ${node} held were not handed on (${firstLine(e)}); they expire on their own`],
    );
    await ssh.run(`${sudo}sh -c '${aside([APISERVER])}'`, `moving ${node}'s kube-apiserver manifest aside`);
    await gone([APISERVER], "kube-apiserver");
    return warnings;
  }

  /**
   * Puts manifests stop-apiserver moved aside back where the kubelet runs them. A manifest in
   * place already wins (the moved-aside copy stays, for a human to compare).
   */
  async restoreControlPlane(
    node: string,
    manifests: string[],
    deadlineSeconds: number,
    signal?: AbortSignal,
  ): Promise<void> {
    const ssh = this.session(node);
    const names = manifests.map((f) => {
      const name = staticPodOfRetired(f);
      if (!name) throw new Error(`${f} is not a manifest stop-apiserver moved aside`);
      return name;
    });
    // A stopped API server may still be finishing requests (or holding watches) until its
    // grace period ends; the kubelet starts the restored pod only after that, so the wait for
    // its health would start late. Its process is waited for here, within its grace period.
    await untilGone(
      ssh,
      names.map((binary) => ({ binary })),
      {
        what: `the stopped ${names.join(", ")} on ${node} to exit before its manifests go back`,
        deadlineSeconds,
        signal,
      },
    );
    await ssh.run(
      `${sudoFor(ssh.target.user)}sh -c '${names
        .map((n) => `if [ ! -e ${manifestPath(n)} ]; then mv ${retiredPath(n)} ${manifestPath(n)}; fi`)
        .join("; ")}'`,
      `putting ${node}'s control-plane manifests back (${names.join(", ")})`,
    );
  }

  /**
   * Hands on the leader Leases `node`'s stopped components hold, through its own API server
   * (still serving), both at once. An optimistic-concurrency update: a Lease renewed or taken
   * meanwhile is someone else's now and stays as it is (409).
   */
  private async releaseLeaderLeases(node: string): Promise<void> {
    const { coord, m } = await this.api(node);
    await Promise.all(
      LEADER_LEASES.map(async (name) => {
        const lease = await coord.readNamespacedLease({ name, namespace: "kube-system" }).catch(notFound);
        // MicroTime: the API server parses six fractional digits only.
        const spec = lease && releasedLease(lease.spec, node, new m.V1MicroTime(Date.now()));
        if (!lease || !spec) return;
        await coord
          .replaceNamespacedLease({ name, namespace: "kube-system", body: { ...lease, spec } })
          .catch((e: unknown) => {
            if ((e as { code?: number }).code !== 409) throw e;
          });
      }),
    );
  }

  /**
   * kube-proxy and CoreDNS get the images `version`'s kubeadm deploys (asked of kubeadm on
   * `node`, which runs that version), as `kubeadm upgrade apply`'s addon phase and Cluster
   * API do.
   */
  async updateAddons(via: string, node: string, version: string): Promise<void> {
    const ssh = this.session(node);
    const images = (
      await ssh.run(
        `${sudoFor(ssh.target.user)}kubeadm config images list --kubernetes-version v${version} 2>/dev/null`,
        `kubeadm config images list on ${node}`,
      )
    )
      .split("\n")
      .map((l) => l.trim());
    const proxy = images.find((i) => /\/kube-proxy:/.test(i));
    const dns = images.find((i) => /\/coredns:/.test(i));
    if (!proxy) throw new Error(`kubeadm on ${node} names no kube-proxy image for v${version}`);
    await this.setImage(via, "DaemonSet", "kube-proxy", "kube-proxy", proxy);
    if (dns) await this.setImage(via, "Deployment", "coredns", "coredns", dns);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const p of this.ports.values()) await p.close();
    this.ports.clear();
  }
}

function firstLine(e: Error): string {
  return String(e.message ?? e).split("\n")[0];
}

/**
 * Polls `watched` on a node until nothing of it runs (static-pods.ts stillRunningScript), every
 * 100 ms: one short SSH command each, and each stop of a retirement waits on it twice.
 */
function untilGone(
  ssh: SshSession,
  watched: readonly Watched[],
  o: { what: string; deadlineSeconds: number; signal?: AbortSignal },
): Promise<true> {
  const script = stillRunningScript(watched);
  const sudo = sudoFor(ssh.target.user);
  return pollUntil(
    async (miss) => {
      const r = await ssh.exec(`${sudo}sh -c '${script}'`);
      if (r.code !== 0) return miss(r.stderr.trim() || `exit ${r.code}`);
      const left = stillRunning(r.stdout);
      return left.length === 0 ? true : miss(`still running: ${left.join("; ")}`);
    },
    { what: o.what, deadlineMs: o.deadlineSeconds * 1000, intervalMs: 100, maxIntervalMs: 100, signal: o.signal },
  );
}
