// The bench's observers of a Kubernetes upgrade, in a child process of their own so the
// orchestrator's RSS and CPU are molt's alone:
//  - the API client of test/support/kube-workload.ts (a ConfigMap written and read through
//    the load balancer every 100 ms);
//  - a gate probe: for each node molt adds (the parent names it when molt decides the
//    surge), polled every 100 ms from outside molt: its kube-apiserver /readyz,
//    kube-controller-manager /healthz and kube-scheduler /livez (inside the machine's
//    network namespace), its Node's Ready condition (through the load balancer), and its
//    etcd member a voter (`etcdctl member list` from inside a machine, bench/etcd-probe.ts),
//    and its target healthy in the lab's load balancer (its HAProxy, as molt's edge reads it).
// Protocol (IPC): argv = [admin.conf, lab name, lab root, the lab LB's inputs as JSON]; child
// sends "ready"; parent sends { watch: node } and finally "stop"; child answers { api, seen } and exits.
import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { labKubeConfig, startApiProbe, type ApiProbeStats } from "../test/support/kube-workload";
import { labMemberList } from "./etcd-probe";
import type { LabLbInputs } from "../infra/lab/lb";
import { labTargets } from "../infra/lab/lb-impl";

export interface Seen {
  watchedAt: number;
  apiReady?: number;
  cm?: number;
  sched?: number;
  nodeReady?: number;
  /** Its etcd member first seen a voter (kubeadm join adds it as a learner and promotes it). */
  voter?: number;
  /** Its target first seen healthy in the lab's load balancer (HAProxy's check, every 1 s). */
  lbHealthy?: number;
}

/** CPU seconds the probe used: its own process, and the processes it started (curl, ip, etcdctl). */
export interface ProbeCpu {
  ownSeconds: number;
  childrenSeconds: number;
}

export type ProbeReply = { api: ApiProbeStats; seen: Record<string, Seen>; cpu?: ProbeCpu };

/** utime+stime and cutime+cstime of this process (/proc/self/stat, in clock ticks of 1/100 s on Linux). */
function cpuOfSelf(): ProbeCpu | undefined {
  try {
    const stat = readFileSync("/proc/self/stat", "utf8");
    // Fields after the command name (which may hold spaces), from field 3 on.
    const f = stat
      .slice(stat.lastIndexOf(")") + 2)
      .split(" ")
      .map(Number);
    const tick = 100;
    return { ownSeconds: (f[11] + f[12]) / tick, childrenSeconds: (f[13] + f[14]) / tick };
  } catch {
    return undefined;
  }
}

const TICK_MS = 100;

/** The three health endpoints' HTTP codes from inside a machine: one curl (000: no answer within 1 s). */
function curlInNetns(ns: string): Promise<string[]> {
  const urls = ["https://127.0.0.1:6443/readyz", "https://127.0.0.1:10257/healthz", "https://127.0.0.1:10259/livez"];
  return new Promise((res) =>
    execFile(
      "ip",
      ["netns", "exec", ns, "curl", "-sk", "-m", "1", "-w", "%{http_code} "]
        .concat(urls.flatMap(() => ["-o", "/dev/null"]))
        .concat(urls),
      { timeout: 5000 },
      (_e, out) =>
        res(
          String(out ?? "")
            .trim()
            .split(/\s+/),
        ),
    ),
  );
}

async function main(): Promise<void> {
  const [adminConf, labName, labRoot, lbJson] = process.argv.slice(2);
  const lb = JSON.parse(lbJson) as LabLbInputs;
  const members = labMemberList({ lab: labName, labRoot });
  const kc = await labKubeConfig(adminConf);
  const m = await import("@kubernetes/client-node");
  const core = kc.makeApiClient(m.CoreV1Api);
  const api = await startApiProbe(kc, 100);
  const watched = new Map<string, Seen>();
  let running = true;
  process.on("message", (msg: unknown) => {
    if (msg === "stop") running = false;
    else if (msg && typeof msg === "object" && "watch" in msg)
      watched.set(String((msg as { watch: string }).watch), { watchedAt: Date.now() });
  });
  process.send!("ready");
  while (running) {
    const started = Date.now();
    const voters = [...watched.values()].some((s) => !s.voter)
      ? members().then((list) => {
          const now = Date.now();
          for (const x of list ?? []) {
            const s = x.name && !x.isLearner ? watched.get(x.name) : undefined;
            if (s) s.voter ??= now;
          }
        })
      : Promise.resolve();
    // One read of the load balancer a tick for every node not yet seen healthy in it.
    const lbPending = [...watched].filter(([, s]) => !s.lbHealthy).map(([name]) => ({ name, address: "" }));
    const apiReadyBefore = new Set([...watched].filter(([, s]) => s.apiReady !== undefined).map(([name]) => name));
    const lbHealth = lbPending.length
      ? labTargets(lb, lbPending).then(
          (t) => {
            const now = Date.now();
            // HAProxy starts every server of a reloaded configuration up, before any check (a
            // new one too, in the lab's default mode): only a check that can have passed, with
            // the API server ready since an earlier tick, counts.
            for (const [node, o] of Object.entries(t))
              if ("state" in o && o.state === "healthy" && apiReadyBefore.has(node))
                watched.get(node)!.lbHealthy ??= now;
          },
          () => undefined, // read again next tick
        )
      : Promise.resolve();
    await Promise.all([
      voters,
      lbHealth,
      ...[...watched].map(async ([node, seen]) => {
        if (seen.apiReady && seen.cm && seen.sched && seen.nodeReady) return;
        const ns = `molt-${labName}-${node}`;
        if (!existsSync(join("/run/netns", ns))) return;
        const [a, c, s] = await curlInNetns(ns);
        const now = Date.now();
        if (a === "200") seen.apiReady ??= now;
        if (c === "200") seen.cm ??= now;
        if (s === "200") seen.sched ??= now;
        if (!seen.nodeReady) {
          const ready = await core.readNode({ name: node }).then(
            (n) => !!n.status?.conditions?.some((x) => x.type === "Ready" && x.status === "True"),
            () => false,
          );
          if (ready) seen.nodeReady = Date.now();
        }
      }),
    ]);
    const rest = TICK_MS - (Date.now() - started);
    if (rest > 0) await new Promise((r) => setTimeout(r, rest));
  }
  const apiStats = await api.stop();
  const cpu = cpuOfSelf();
  const reply: ProbeReply = { api: apiStats, seen: Object.fromEntries(watched), ...(cpu ? { cpu } : {}) };
  process.send!(reply, () => process.exit(0));
}

main().catch((e) => {
  console.error("bench probe:", e);
  process.exit(1);
});
