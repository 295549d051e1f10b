// The Kubernetes part of the bench's floor (bench/raw-work.ts): what an operator does by
// hand around each kubeadm join and machine destroy, with no molt and no engine, in molt's order:
// kubeadm-config's version before the first join; after a join, the new node's
// controller-manager, scheduler and Node Ready; before an old node's member is removed, its
// drain (cordon, evictions through the Eviction API, its pods gone) and its control plane
// stopped (manifests moved aside, leader Leases handed on, nothing listening on 6443); after
// its machine is gone, its Node and the pods still bound to it deleted; at the end kube-proxy
// and CoreDNS set to the new version's images and the
// kube-proxy DaemonSet rolled out. The API calls go through the lab's load balancer, as
// kubectl's would; the checks poll every 100 ms. molt's pure parsers (which pods a drain
// evicts, Node Ready, kube-proxy rolled out) are reused, so both sides judge the same conditions.
import { parse as parseYaml, stringify as stringifyYaml } from "yaml";
import { clusterConfigurationAt } from "../infra/kubeadm/cluster-config";
import type { SshSession } from "../infra/remote/ssh";
import { kubeNodeOf, kubeProxyOf } from "../orchestrator/edges/kube";
import { readFileSync } from "node:fs";
import { Agent } from "node:https";
import { apiClientsOver, credentialsOf, k8s, LEADER_LEASES, releasedLease } from "../orchestrator/edges/kube-support";
import { isEvictable } from "../orchestrator/core/drain";
import { pollUntil } from "../lib/poll";

export interface RawKube {
  beforeFirstJoin(): Promise<void>;
  /** After the join script: controller-manager and scheduler healthy, the Node Ready. */
  afterJoin(node: string, ssh: SshSession): Promise<void>;
  /** Before the old node's member is removed: drained (cordon, evictions, its pods gone)... */
  drain(node: string): Promise<void>;
  /** ...then its API server stopped (manifest moved aside, nothing listening on 6443). */
  stopApiServer(node: string, ssh: SshSession): Promise<void>;
  /** After its machine is gone: its Node and the pods bound to it deleted. */
  afterStop(node: string): Promise<void>;
  /** After the last node: the addons of the new version, kube-proxy rolled out. */
  atEnd(ssh: SshSession): Promise<void>;
  /** Its kept-alive connections closed. */
  close(): void;
}

const TICK = { intervalMs: 100, maxIntervalMs: 100 };

export async function rawKube(adminConf: string, version: string, deadlineMs: number): Promise<RawKube> {
  const m = await k8s();
  // Over kept-alive connections, as molt's calls (edges/kube-support.ts apiClientsOver) and as
  // kubectl's within one command: a TLS handshake per connection, not per call.
  const text = readFileSync(adminConf, "utf8");
  const credentials = credentialsOf(text);
  const server = (parseYaml(text) as { clusters?: { cluster?: { server?: string } }[] })?.clusters?.[0]?.cluster
    ?.server;
  if (!credentials || !server) throw new Error(`${adminConf} has no server or client certificate`);
  const agent = new Agent({ keepAlive: true, ...credentials });
  const { core, apps, coord } = apiClientsOver(m, server, agent);
  const until = <T>(what: string, check: () => Promise<T | undefined>) =>
    pollUntil(
      async () => {
        try {
          return await check();
        } catch {
          return undefined; // an API server going away mid-call: asked again
        }
      },
      { what, deadlineMs, ...TICK },
    );
  const strategic = m.setHeaderOptions("Content-Type", m.PatchStrategy.StrategicMergePatch);
  return {
    async beforeFirstJoin() {
      const cm = await core.readNamespacedConfigMap({ name: "kubeadm-config", namespace: "kube-system" });
      const cc = (parseYaml(cm.data?.ClusterConfiguration ?? "") ?? {}) as Record<string, unknown>;
      cm.data = { ...cm.data, ClusterConfiguration: stringifyYaml(clusterConfigurationAt(cc, version)) };
      await core.replaceNamespacedConfigMap({ name: "kubeadm-config", namespace: "kube-system", body: cm });
    },
    async afterJoin(node, ssh) {
      await until(`${node}'s controller-manager, scheduler and Node Ready`, async () => {
        const [health, n] = await Promise.all([
          ssh.exec("curl -fsk https://127.0.0.1:10257/healthz && curl -fsk https://127.0.0.1:10259/livez"),
          core.readNode({ name: node }),
        ]);
        return health.code === 0 && kubeNodeOf(n).ready ? true : undefined;
      });
    },
    async drain(node) {
      await core.patchNode(
        { name: node, body: { spec: { unschedulable: true } } },
        m.setHeaderOptions("Content-Type", m.PatchStrategy.MergePatch),
      );
      await until(`${node} drained`, async () => {
        const pods = (await core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${node}` })).items.filter(
          isEvictable,
        );
        if (pods.length === 0) return true;
        await Promise.all(
          pods
            .filter((p) => !p.metadata?.deletionTimestamp)
            .map(
              (p) =>
                core
                  .createNamespacedPodEviction({
                    name: p.metadata!.name!,
                    namespace: p.metadata!.namespace!,
                    body: {
                      apiVersion: "policy/v1",
                      kind: "Eviction",
                      metadata: { name: p.metadata!.name!, namespace: p.metadata!.namespace! },
                    },
                  })
                  .catch(() => undefined), // 429 (a budget) or 404: the next round asks again
            ),
        );
        return undefined;
      });
    },
    async stopApiServer(node, ssh) {
      // As molt does (KubeAccess.stopApiServer): controller-manager and scheduler first, then
      // the leader Leases this node held handed on, so no retirement leaves the cluster
      // without controllers for a lease's duration.
      await ssh.run(
        "for c in kube-controller-manager kube-scheduler; do if [ -f /etc/kubernetes/manifests/$c.yaml ]; then " +
          "mv /etc/kubernetes/manifests/$c.yaml /etc/kubernetes/$c.yaml.retired; fi; done",
        "moving the controller-manager and scheduler manifests aside",
      );
      await until(`${node}'s controller-manager and scheduler to stop`, async () => {
        const r = await ssh.exec("ss -ltnH '( sport = :10257 or sport = :10259 )'");
        return r.code === 0 && r.stdout.trim() === "" ? true : undefined;
      });
      for (const name of LEADER_LEASES) {
        const lease = await coord.readNamespacedLease({ name, namespace: "kube-system" });
        const spec = releasedLease(lease.spec, node, new m.V1MicroTime(Date.now()));
        if (spec)
          await coord
            .replaceNamespacedLease({ name, namespace: "kube-system", body: { ...lease, spec } })
            .catch(() => undefined); // 409: renewed or taken meanwhile, someone else's now
      }
      await ssh.run(
        "mv /etc/kubernetes/manifests/kube-apiserver.yaml /etc/kubernetes/kube-apiserver.yaml.retired",
        `moving ${node}'s kube-apiserver manifest aside`,
      );
      await until(`${node}'s kube-apiserver to stop`, async () => {
        const r = await ssh.exec("ss -ltnH 'sport = :6443'");
        return r.code === 0 && r.stdout.trim() === "" ? true : undefined;
      });
    },
    async afterStop(node) {
      // As molt does (KubeAccess.deleteNode): the pods no kubelet will confirm go at once, not
      // after the pod garbage collector's 40 s quarantine (kube-proxy's rollout waits for them).
      await core.deleteNode({ name: node });
      const pods = await core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${node}` });
      await Promise.all(
        pods.items.map(
          (p) =>
            core
              .deleteNamespacedPod({
                name: p.metadata!.name!,
                namespace: p.metadata!.namespace!,
                gracePeriodSeconds: 0,
                body: { gracePeriodSeconds: 0, preconditions: { uid: p.metadata?.uid } },
              })
              .catch(() => undefined), // 404 / 409: gone or replaced meanwhile
        ),
      );
    },
    async atEnd(ssh) {
      const images = (await ssh.run(`kubeadm config images list --kubernetes-version v${version}`, "images"))
        .split("\n")
        .map((l) => l.trim());
      const proxy = images.find((i) => /\/kube-proxy:/.test(i))!;
      const dns = images.find((i) => /\/coredns:/.test(i));
      const patch = (name: string, image: string) => ({
        spec: { template: { spec: { containers: [{ name, image }] } } },
      });
      await apps.patchNamespacedDaemonSet(
        { name: "kube-proxy", namespace: "kube-system", body: patch("kube-proxy", proxy) },
        strategic,
      );
      if (dns)
        await apps.patchNamespacedDeployment(
          { name: "coredns", namespace: "kube-system", body: patch("coredns", dns) },
          strategic,
        );
      await until("the kube-proxy DaemonSet to roll out", async () => {
        const ds = await apps.readNamespacedDaemonSet({ name: "kube-proxy", namespace: "kube-system" });
        return kubeProxyOf(ds)?.rolledOut ? true : undefined;
      });
    },
    close: () => agent.destroy(),
  };
}
