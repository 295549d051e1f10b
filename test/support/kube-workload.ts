// A workload for the lab's Kubernetes and an API client that measures availability:
//  - deployWorkload: a Deployment of `replicas` pods that tolerate the control-plane taint
//    and spread over the nodes, guarded by a PodDisruptionBudget (minAvailable);
//  - startApiProbe: reads and writes a ConfigMap through the control-plane load balancer
//    every `intervalMs`, recording every failed request and the longest failure window.
// Used by the e2e tests and the bench; the admin credentials come from a lab node.
import { readFileSync } from "node:fs";

type K8s = typeof import("@kubernetes/client-node");
const k8s = (): Promise<K8s> => import("@kubernetes/client-node");

export const WORKLOAD_NS = "molt-workload";

/** A KubeConfig from a lab node's admin.conf (it points at the lab load balancer). */
export async function labKubeConfig(adminConfPath: string) {
  const { KubeConfig } = await k8s();
  const kc = new KubeConfig();
  kc.loadFromString(readFileSync(adminConfPath, "utf8"));
  return kc;
}

type Kc = Awaited<ReturnType<typeof labKubeConfig>>;

async function ignoreExists<T>(p: Promise<T>): Promise<void> {
  try {
    await p;
  } catch (e) {
    if ((e as { code?: number }).code !== 409) throw e;
  }
}

export async function deployWorkload(kc: Kc, o: { replicas: number; minAvailable: number }): Promise<void> {
  const m = await k8s();
  const core = kc.makeApiClient(m.CoreV1Api);
  const apps = kc.makeApiClient(m.AppsV1Api);
  await ignoreExists(core.createNamespace({ body: { metadata: { name: WORKLOAD_NS } } }));
  const labels = { app: "web" };
  await ignoreExists(
    apps.createNamespacedDeployment({
      namespace: WORKLOAD_NS,
      body: {
        metadata: { name: "web", labels },
        spec: {
          replicas: o.replicas,
          selector: { matchLabels: labels },
          template: {
            metadata: { labels },
            spec: {
              tolerations: [{ key: "node-role.kubernetes.io/control-plane", operator: "Exists", effect: "NoSchedule" }],
              topologySpreadConstraints: [
                {
                  maxSkew: 1,
                  topologyKey: "kubernetes.io/hostname",
                  whenUnsatisfiable: "ScheduleAnyway",
                  labelSelector: { matchLabels: labels },
                },
              ],
              containers: [{ name: "web", image: "registry.k8s.io/pause:3.10" }],
            },
          },
        },
      },
    }),
  );
  await setPdb(kc, o.minAvailable);
}

/** Creates or replaces the workload's PodDisruptionBudget. */
export async function setPdb(kc: Kc, minAvailable: number): Promise<void> {
  const m = await k8s();
  const policy = kc.makeApiClient(m.PolicyV1Api);
  try {
    await policy.deleteNamespacedPodDisruptionBudget({ name: "web", namespace: WORKLOAD_NS });
  } catch (e) {
    if ((e as { code?: number }).code !== 404) throw e;
  }
  await policy.createNamespacedPodDisruptionBudget({
    namespace: WORKLOAD_NS,
    body: { metadata: { name: "web" }, spec: { minAvailable, selector: { matchLabels: { app: "web" } } } },
  });
}

/** Waits (polling, with a deadline) until `n` workload pods are Running and Ready. */
export async function waitForReadyPods(kc: Kc, n: number, deadlineMs: number): Promise<void> {
  const m = await k8s();
  const core = kc.makeApiClient(m.CoreV1Api);
  const until = Date.now() + deadlineMs;
  for (;;) {
    const pods = await core.listNamespacedPod({ namespace: WORKLOAD_NS, labelSelector: "app=web" });
    const ready = pods.items.filter(
      (p) =>
        !p.metadata?.deletionTimestamp && p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True"),
    ).length;
    if (ready >= n) return;
    if (Date.now() > until) throw new Error(`only ${ready} of ${n} workload pods became ready`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

export async function workloadPods(kc: Kc): Promise<{ name: string; node: string; ready: boolean }[]> {
  const m = await k8s();
  const core = kc.makeApiClient(m.CoreV1Api);
  const pods = await core.listNamespacedPod({ namespace: WORKLOAD_NS, labelSelector: "app=web" });
  return pods.items.map((p) => ({
    name: p.metadata!.name!,
    node: p.spec?.nodeName ?? "",
    ready: !!p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True"),
  }));
}

export interface ApiProbeStats {
  requests: number;
  failures: number;
  /** Longest stretch from a failed request to the next successful one (ms). */
  longestOutageMs: number;
  /** First few distinct errors, for the report. */
  errors: string[];
  /** [start, end] of each failure stretch, ms since the probe started. */
  outages: [number, number][];
}

/** Reads and writes a ConfigMap through the load balancer until stopped. */
export async function startApiProbe(kc: Kc, intervalMs = 100): Promise<{ stop: () => Promise<ApiProbeStats> }> {
  const m = await k8s();
  const core = kc.makeApiClient(m.CoreV1Api);
  const name = "molt-probe";
  await ignoreExists(
    core.createNamespacedConfigMap({ namespace: WORKLOAD_NS, body: { metadata: { name }, data: { n: "0" } } }),
  );
  const t0 = Date.now();
  const stats: ApiProbeStats = { requests: 0, failures: 0, longestOutageMs: 0, errors: [], outages: [] };
  let failingSince: number | undefined;
  let running = true;
  let n = 0;
  const record = (ok: boolean, err?: unknown) => {
    stats.requests++;
    const now = Date.now() - t0;
    if (ok) {
      if (failingSince !== undefined) {
        stats.outages.push([failingSince, now]);
        stats.longestOutageMs = Math.max(stats.longestOutageMs, now - failingSince);
        failingSince = undefined;
      }
      return;
    }
    stats.failures++;
    failingSince ??= now;
    const msg = String((err as Error)?.message ?? err)
      .split("\n")[0]
      .slice(0, 160);
    if (stats.errors.length < 5 && !stats.errors.includes(msg)) stats.errors.push(msg);
  };
  const loop = (async () => {
    while (running) {
      const started = Date.now();
      try {
        await core.patchNamespacedConfigMap(
          { name, namespace: WORKLOAD_NS, body: { data: { n: String(++n) } } },
          m.setHeaderOptions("Content-Type", m.PatchStrategy.MergePatch),
        );
        record(true);
      } catch (e) {
        record(false, e);
      }
      try {
        await core.readNamespacedConfigMap({ name, namespace: WORKLOAD_NS });
        record(true);
      } catch (e) {
        record(false, e);
      }
      const rest = intervalMs - (Date.now() - started);
      if (rest > 0) await new Promise((r) => setTimeout(r, rest));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      if (failingSince !== undefined) {
        const now = Date.now() - t0;
        stats.outages.push([failingSince, now]);
        stats.longestOutageMs = Math.max(stats.longestOutageMs, now - failingSince);
      }
      return stats;
    },
  };
}

/** Writes a Secret in `default` (replaced when there), through the load balancer. */
export async function writeSecret(kc: Kc, name: string, value: string): Promise<void> {
  const m = await k8s();
  const core = kc.makeApiClient(m.CoreV1Api);
  await core.deleteNamespacedSecret({ name, namespace: "default" }).catch(() => undefined);
  await core.createNamespacedSecret({
    namespace: "default",
    body: { metadata: { name }, stringData: { value } },
  });
}

/** A Secret's `value`, as the API serves it (decrypted by whichever API server answers). */
export async function readSecret(kc: Kc, name: string): Promise<string> {
  const m = await k8s();
  const core = kc.makeApiClient(m.CoreV1Api);
  const s = await core.readNamespacedSecret({ name, namespace: "default" });
  return Buffer.from(s.data?.value ?? "", "base64").toString();
}
