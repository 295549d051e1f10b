// The chaos harness: rollouts on the lab while molt is SIGKILLed at step boundaries, a new
// node's bootstrap fails, an old member dies, the backend turns read-only mid-`up`, the load
// balancer restarts and SSH connections drop. A probe writes and reads through etcd the
// whole time; after every scenario the invariants are checked against the real cluster,
// the stack state, the lab and the host, and a table row is recorded.
//
// Used by `npm run chaos` (every scenario) and test/e2e/chaos.test.ts (a bounded subset in CI).
import { execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { LabSettings } from "../infra/lab/settings";
import { openStore } from "../orchestrator/backend/store";
import { EtcdAccess } from "../orchestrator/edges/etcd";
import { inspectLease, lockKey, parseLeaseRecord, readLease } from "../orchestrator/lease/bucket";
import { clusterLockKeys } from "../orchestrator/lease/cluster";
import { engineLocks } from "../orchestrator/stack/engine-lock";
import { cacheDir } from "../orchestrator/stack/engine";
import { pollUntil } from "../lib/poll";
import { inspect } from "../orchestrator/inspect";
import type { StoredState } from "../orchestrator/core/nodes";
import { ownerOf, urnName, type StateResource } from "../orchestrator/stack/targets";
import { openStack } from "../orchestrator/stack/driver";
import { engineTag } from "../orchestrator/stack/engine-process";
import { engineProcessesOf } from "../orchestrator/stack/leftovers";
import { startCli, summaryOf, type CliRun } from "../test/support/cli";
import { cliSuite, type CliSuite } from "../test/support/cli-suite";
import { labLeftovers, labStackYaml } from "../test/support/lab";
import { labEndpoints, startClusterProbe, type ProbeReport } from "../test/support/probe";
import type { S3Server } from "../test/support/s3";
import { makeWorkDir } from "../test/support/workdir";

export type Event = Record<string, unknown>;

/**
 * A run's step as the trace shows it: a decision (its kind and node) or an engine line about
 * a machine or a node's bootstrap, so that a broken invariant can be read back to the runs.
 */
function traceStep(e: Event): string | undefined {
  if (e.type === "decision") {
    const o = e.operation as { kind: string; node?: string; entry?: { name: string } };
    const node = o.node ?? o.entry?.name;
    return node ? `${o.kind} ${node}` : o.kind;
  }
  const m =
    e.type === "engine" ? /(\S+-(?:machine|etcd)) (creating|created|deleting|deleted)\b/.exec(String(e.line)) : null;
  return m ? `[${m[1]} ${m[2]}]` : undefined;
}

/** A place in a rollout where the harness SIGKILLs molt and the engine (never the engine's plugins). */
export interface KillPoint {
  id: string;
  what: string;
  /** Matches an event of the run (`--json --verbose`: decisions, phases, engine lines). */
  match?: (e: Event, st: RunState) => boolean;
  /** Or a condition on the cluster, polled while the run is in the given operation. */
  cluster?: { during: string; test: (m: { voters: number; learners: number }) => boolean };
  /** Kill this long after the match (inside the step that just started). */
  delayMs?: number;
  /** May not occur in a rollout (e.g. a leader move happens only if the victim leads). */
  optional?: boolean;
}

interface RunState {
  /** The operation kind of the last decision. */
  op: string;
}

const op = (kind: string) => (e: Event) => e.type === "decision" && (e.operation as { kind: string }).kind === kind;
const phase = (p: string, kind: string) => (e: Event) =>
  e.type === "phase" && e.phase === p && e.operation === kind && e.ok === true;
const engine = (suffix: string, verb: string) => {
  const re = new RegExp(`\\S+-${suffix} ${verb}\\b`);
  return (e: Event, st: RunState) =>
    e.type === "engine" && ["surge", "prune", "prune-and-surge"].includes(st.op) && re.test(String(e.line));
};

/** In flow order: one node replacement passes every point once (move-leader only if the victim leads). */
export const KILL_POINTS: KillPoint[] = [
  {
    id: "k01",
    what: "after a pass observed, before it decides",
    match: (e) => e.type === "observed" && (e.pass as number) > 1,
  },
  { id: "k02", what: "surge decided, before `up`", match: op("surge") },
  { id: "k03", what: "surge `up`: host key made", match: engine("hostkey", "created") },
  { id: "k04", what: "surge `up`: machine booting", match: engine("machine", "creating"), delayMs: 300 },
  { id: "k05", what: "surge `up`: machine up, LB attachment being made", match: engine("lb", "creating") },
  { id: "k06", what: "surge `up`: join material fetched from the seed", match: engine("join", "created") },
  { id: "k07", what: "surge `up`: join script started", match: engine("etcd", "creating"), delayMs: 300 },
  {
    id: "k08",
    what: "between member add and promote (a learner exists)",
    cluster: { during: "surge", test: (m) => m.learners > 0 },
  },
  {
    id: "k09",
    what: "promoted, `up` not yet finished",
    cluster: { during: "surge", test: (m) => m.voters === 4 && m.learners === 0 },
  },
  { id: "k10", what: "surge `up` finished, before the new node is verified", match: phase("provision", "surge") },
  { id: "k11", what: "etcd snapshot saved, before the first membership change", match: (e) => e.type === "snapshot" },
  { id: "k12", what: "leader move decided", match: op("move-leader"), optional: true },
  { id: "k13", what: "member removal decided (quorum checked)", match: op("remove-member") },
  { id: "k14", what: "member removed, its machine still running", match: phase("etcd", "remove-member") },
  { id: "k15", what: "prune decided, before `up`", match: op("prune") },
  // No delay: a prune without a reset is over within 200 ms on the lab, and a later kill
  // landed in the next node's surge instead.
  {
    id: "k16",
    what: "prune `up`: teardown skipped (no reset), detach/destroy next",
    match: engine("etcd", "deleting"),
  },
  { id: "k17", what: "prune `up`: bootstrap record deleted, LB detach next", match: engine("etcd", "deleted") },
  { id: "k18", what: "prune `up`: LB detach", match: engine("lb", "deleting") },
  { id: "k19", what: "prune `up`: machine being destroyed", match: engine("machine", "deleting") },
  { id: "k20", what: "prune `up`: machine gone, state not yet written", match: engine("machine", "deleted") },
  { id: "k21", what: "prune `up` finished, before the next pass", match: phase("provision", "prune") },
  { id: "k22", what: "second surge decided (next node)", match: op("surge") },
];

/**
 * The Kubernetes steps of an upgrade (k8s-v1.36.3 → k8s-v1.37.2), in flow order: the first
 * node replacement passes the first eight, the addon update comes after the last one.
 */
export const KUBE_KILL_POINTS: KillPoint[] = [
  { id: "q01", what: "kubeadm-config update decided", match: op("update-cluster-config") },
  { id: "q02", what: "kubeadm-config updated, before the first surge", match: phase("kube", "update-cluster-config") },
  { id: "q03", what: "`kubeadm join --control-plane` running", match: engine("etcd", "creating"), delayMs: 3000 },
  { id: "q04", what: "drain decided (cordon next)", match: op("drain") },
  { id: "q05", what: "drained, before the API server stops", match: phase("kube", "drain") },
  { id: "q06", what: "API server stopped, before member removal", match: phase("kube", "stop-apiserver") },
  {
    id: "q07",
    what: "prune `up`: teardown skipped (no reset), destroy under way",
    match: engine("etcd", "deleting"),
    delayMs: 500,
  },
  { id: "q08", what: "machine destroyed, before its Node is deleted", match: phase("provision", "prune") },
  { id: "q09", what: "addon update decided (every node upgraded)", match: op("update-addons") },
  // At the addon update's end, not 1.5 s after its decision: since pods bound to a deleted Node
  // go with it, the update and kube-proxy's rollout are over within a second, and a delayed
  // kill would come after the run.
  {
    id: "q10",
    what: "addon images set, DaemonSet rolling out",
    match: phase("kube", "update-addons"),
  },
];

/**
 * molt:rollout.pruneWithNextSurge: the one engine run that creates the next node and then
 * destroys the retired one (plan/overlap.ts), in flow order. `npm run chaos -- --only overlap`.
 */
export const OVERLAP_KILL_POINTS: KillPoint[] = [
  { id: "o01", what: "prune-and-surge decided, before `up`", match: op("prune-and-surge") },
  {
    id: "o02",
    what: "prune-and-surge `up`: new machine booting",
    match: engine("machine", "creating"),
    delayMs: 300,
  },
  {
    id: "o03",
    what: "prune-and-surge `up`: new node's join script started",
    match: engine("etcd", "creating"),
    delayMs: 300,
  },
  {
    id: "o04",
    what: "prune-and-surge `up`: a learner exists",
    cluster: { during: "prune-and-surge", test: (m) => m.learners > 0 },
  },
  {
    id: "o05",
    what: "prune-and-surge `up`: new node joined, retired node being destroyed (no reset)",
    match: engine("etcd", "deleting"),
    delayMs: 200,
  },
  {
    id: "o06",
    what: "prune-and-surge `up`: retired machine being destroyed",
    match: engine("machine", "deleting"),
    delayMs: 200,
  },
  {
    id: "o07",
    what: "prune-and-surge `up` finished, before the next pass",
    match: phase("provision", "prune-and-surge"),
  },
];

/** A bounded subset for CI: one point in each stretch of the flow. */
export const CI_KILL_POINTS = ["k02", "k04", "k08", "k10", "k14", "k16", "k19", "k21"];

export interface InvariantResult {
  name: string;
  ok: boolean;
  detail: string;
}

export interface ScenarioResult {
  scenario: string;
  faults: string[];
  runs: number;
  /** Runs after the last fault until the rollout converged (0: it converged in the faulted run). */
  rerunsAfterFault: number;
  probe: { ok: number; failed: number; longestGapMs: number };
  invariants: InvariantResult[];
  notes: string[];
  wallMs: number;
  ok: boolean;
}

export interface ChaosOptions {
  lab: LabSettings;
  stack?: string;
  log?: (line: string) => void;
  /**
   * The images the cluster goes through: it is created on the first, and each leg rolls to
   * the next. With two, legs go back and forth; Kubernetes images only ever go forward.
   */
  images?: string[];
  /**
   * Keep the state in this S3 server's bucket instead of a folder (shared-backend scenarios):
   * every run is then "runner A" (its own host name, work tree and home), and
   * `twoRunnerKill` adds "runner B".
   */
  s3?: S3Server;
  /** molt:timeouts.lockSeconds of the stack (the lease's time to live). */
  lockSeconds?: number;
  /** molt:rollout.pruneWithNextSurge for every rollout of the scenario. */
  pruneWithNextSurge?: boolean;
  /**
   * molt:lock.in: "cluster" keeps the lease in the cluster's etcd (a file backend still holds
   * the state): every run is then "runner A", with its own host name and home, and
   * `clusterLockKill` adds "runner B".
   */
  lockIn?: "cluster";
}

/** A run's error message (its summary when it printed none). */
function errorOf(r: CliRun): string {
  return (r.events.find((e) => e.type === "error") as { message?: string } | undefined)?.message ?? summaryOrError(r);
}

/** Runs the CLI as another machine would: its own UTS namespace and host name. */
export function runnerWrap(host: string): string[] {
  return ["unshare", "--uts", "--", "sh", "-c", 'hostname "$0" && exec "$@"', host];
}

/** One run of a scenario in its trace: the steps it took, and how it ended. */
function runLine(n: number, steps: string[], end: string): string {
  return `run ${n}: ${steps.join(", ") || "no step"} -> ${end}`;
}

/** One lab, one stack, one backend on its own tmpfs (so it can be made read-only). */
export class Chaos {
  readonly stack: string;
  readonly suite: CliSuite;
  readonly lab: LabSettings;
  private readonly log: (line: string) => void;
  private image: string;
  private readonly images: string[];
  private stateMount = false;
  private readonly s3?: S3Server;
  private readonly lockSeconds?: number;
  private readonly pruneWithNextSurge?: boolean;
  private readonly lockIn?: "cluster";
  /** The lock events of the run that created the cluster. */
  createdWith: string[] = [];
  /** How the stack was created (racedCreate), for the scenario's notes. */
  createdNotes: string[] = [];
  /** Run at teardown. */
  private readonly cleanups: (() => void)[] = [];
  /** How the CLI is started (runner A's host name when the backend is shared). */
  private readonly wrap: string[] = [];

  constructor(o: ChaosOptions) {
    this.lab = o.lab;
    this.stack = o.stack ?? "chaos";
    this.log = o.log ?? ((l) => console.log(`    ${l}`));
    this.images = o.images ?? ["lab-v1", "lab-v2"];
    this.image = this.images[0];
    this.suite = cliSuite("molt-chaos-", this.stack, o.lab);
    const state = join(this.suite.wd.dir, "state");
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=256m,mode=700", "molt-chaos-state", state]);
    this.stateMount = true;
    this.lockSeconds = o.lockSeconds;
    this.pruneWithNextSurge = o.pruneWithNextSurge;
    this.lockIn = o.lockIn;
    if (o.lockIn) {
      const home = join(this.suite.wd.dir, "home-a");
      mkdirSync(home);
      Object.assign(this.suite.env, { MOLT_HOME: home, HOME: home, MOLT_CACHE: cacheDir() });
      this.wrap = runnerWrap("runner-a");
    }
    if (o.s3) {
      this.s3 = o.s3;
      const home = join(this.suite.wd.dir, "home");
      // Mutated in place: the suite's own helpers (stored state, teardown) read this object.
      Object.assign(this.suite.env, {
        PULUMI_BACKEND_URL: o.s3.url("molt-state", this.stack),
        ...o.s3.credentials,
        HOME: home,
        // The runner's own installed engine (tools/setup.sh), not found through HOME here.
        MOLT_CACHE: cacheDir(),
      });
      this.wrap = runnerWrap("runner-a");
    }
  }

  get env(): Record<string, string> {
    return this.suite.env;
  }

  stored(): Promise<StoredState> {
    return this.suite.stored();
  }

  setImage(image: string, o: { joinSeconds?: number; settleSeconds?: number } = {}): void {
    this.suite.wd.writeStackConfig(
      this.stack,
      labStackYaml(this.lab, {
        image,
        joinSeconds: o.joinSeconds ?? 120,
        settleSeconds: o.settleSeconds ?? 30,
        ...(this.lockSeconds ? { lockSeconds: this.lockSeconds } : {}),
        ...(this.pruneWithNextSurge ? { pruneWithNextSurge: true } : {}),
        ...(this.lockIn ? { lockIn: this.lockIn } : {}),
      }),
    );
  }

  /** Records that the cluster converged on `image`. */
  private settled(image: string): void {
    this.image = image;
  }

  /** The image the cluster is on now (the target of the last good rollout). */
  get current(): string {
    return this.image;
  }

  other(): string {
    const i = this.images.indexOf(this.image);
    if (this.images.length === 2) return this.images[1 - i];
    if (i + 1 >= this.images.length) throw new Error(`no image after ${this.image} to roll to`);
    return this.images[i + 1];
  }

  /** `molt rollout --json --verbose`; `onEvent` may kill it. */
  start(onEvent?: (e: Event, kill: () => void) => void, extra: string[] = []) {
    const n = ++this.runCount;
    const steps: string[] = [];
    this.running.set(n, steps);
    const h = startCli(
      ["rollout", "--stack", this.stack, "--yes", "--json", "--verbose", ...extra],
      this.env,
      (e) => {
        const step = traceStep(e);
        if (step) steps.push(step);
        onEvent?.(e, h.kill9);
      },
      this.wrap,
    );
    void h.done.then((run) => {
      this.running.delete(n);
      this.trace.push(runLine(n, steps, run.signal ?? `exit ${run.code}`));
      // MOLT_CHAOS_TRACE=<dir>: each run's whole output, to read a broken scenario back.
      const dir = process.env.MOLT_CHAOS_TRACE;
      if (dir && dir.startsWith("/")) {
        mkdirSync(dir, { recursive: true });
        writeFileSync(join(dir, `${this.stack}-run-${n}.log`), `${run.stdout}\n--- stderr\n${run.stderr}`);
      }
    });
    return h;
  }

  /** What each run of the current scenario did, printed when an invariant breaks. */
  private trace: string[] = [];
  /** The steps of the runs still going, by run number. */
  private readonly running = new Map<number, string[]>();

  /**
   * The current scenario's runs so far, the unfinished ones with their steps up to now: for a
   * scenario that never returns (the test's timeout), where it stood; between runs, what it
   * waits for (session 23's hang: a run had ended, and the scenario waited on a cluster
   * watcher stuck in an SSH connect). Empty once the scenario returned: it printed its trace.
   */
  traceSoFar(): string[] {
    if (this.stage === undefined) return [];
    return [
      ...this.trace,
      ...[...this.running].map(([n, steps]) => runLine(n, steps, "still running")),
      ...(this.running.size === 0 ? [`between runs: ${this.stage}`] : []),
    ];
  }
  /** Where the current scenario stands between runs; undefined once it returned. */
  private stage?: string;
  private runCount = 0;

  async rollout(extra: string[] = []): Promise<CliRun> {
    return this.start(undefined, extra).done;
  }

  /** Reruns the plain rollout until it succeeds (or is a no-op); returns how many runs it took. */
  async converge(maxRuns = 4): Promise<{ runs: number; last: CliRun }> {
    let last: CliRun | undefined;
    for (let i = 1; i <= maxRuns; i++) {
      last = await this.rollout();
      const s = summaryOrError(last);
      this.log(`rerun ${i}: exit ${last.code}: ${s}`);
      if (last.code === 0) return { runs: i, last };
    }
    throw new Error(`did not converge in ${maxRuns} runs; last: ${summaryOrError(last!)}`);
  }

  async create(): Promise<void> {
    this.setImage(this.images[0]);
    const run = await this.rollout();
    if (run.code !== 0) throw new Error(`creating the chaos cluster failed: ${summaryOrError(run)}`);
    this.createdWith = run.events.filter((e) => e.type === "lock").map((e) => String((e as { scope?: string }).scope));
    this.createdNotes = [`creating the stack: lock events ${this.createdWith.join(" -> ")}`];
  }

  startProbe() {
    return this.stored().then((st) => startClusterProbe(this.lab, st.sshPrivateKey!, 100));
  }

  /** Every invariant of a converged cluster, checked independently of molt's own view. */
  async invariants(probe: ProbeReport | undefined): Promise<InvariantResult[]> {
    const out: InvariantResult[] = [];
    const check = async (name: string, fn: () => Promise<string | undefined> | string | undefined) => {
      try {
        const problem = await fn();
        out.push({ name, ok: !problem, detail: problem ?? "" });
      } catch (e) {
        out.push({ name, ok: false, detail: (e as Error).message.split("\n")[0] });
      }
    };
    const st = await this.stored();
    const listed = st.nodes.map((n) => n.name).sort();
    const access = await EtcdAccess.open(st.endpoints, { user: st.sshUser, privateKey: st.sshPrivateKey! });
    try {
      const client = access.voters(access.nodes());
      const members = await access.memberList(access.nodes()[0]);
      if (probe) {
        await check("quorum kept (no write gap > 5 s)", () =>
          probe.longestGapMs > 5000
            ? `longest gap without a successful write+read: ${probe.longestGapMs} ms`
            : undefined,
        );
        await check("no acknowledged write lost", async () => {
          let lost = 0;
          for (const [k, v] of probe.acknowledged) if ((await client.get(k).string()) !== v) lost++;
          return lost ? `${lost} of ${probe.acknowledged.size} acknowledged writes lost` : undefined;
        });
      }
      await check("hashKV equal at one revision", async () => {
        const put = await client.put("molt-chaos/revision-marker").value(String(Date.now())).exec();
        const rev = put.header.revision;
        const hashes = await Promise.all(access.nodes().map((n) => access.hashKV(n, rev)));
        return new Set(hashes.map((h) => h.hash)).size === 1
          ? undefined
          : `hashKV differs at revision ${rev}: ${JSON.stringify(hashes)}`;
      });
      await check("no learner left", () =>
        members.some((m) => m.isLearner)
          ? `learners: ${members.filter((m) => m.isLearner).map((m) => m.name)}`
          : undefined,
      );
      await check("no cluster lease left (molt:lock.in cluster)", async () => {
        const kv = access.leaseKv();
        const { key, last } = clusterLockKeys(this.stack);
        const left = [await kv.get(key), await kv.get(last)].filter((x) => x !== undefined);
        return left.length
          ? `etcd still holds ${left.map((l) => parseLeaseRecord(l.value)?.holder.runId ?? "?").join(", ")}`
          : undefined;
      });
      await check("members == nodes", () => {
        const names = members.map((m) => m.name).sort();
        return JSON.stringify(names) === JSON.stringify(listed) ? undefined : `members [${names}] vs nodes [${listed}]`;
      });
    } finally {
      await access.close();
    }
    await check("nodes == stack resources", async () => {
      const s = await openStack({
        stackName: this.stack,
        workDir: this.suite.wd.dir,
        env: this.env,
        create: false,
        program: async () => ({}),
      });
      const { deployment } = await s.exportStack();
      const resources = (deployment?.resources ?? []) as StateResource[];
      const pending = (deployment?.pending_operations ?? []) as unknown[];
      if (pending.length) return `${pending.length} pending operation(s) in the state`;
      // Every node-shaped resource (`<stack>-cp-N…`) belongs to a listed node, and every listed node has a machine.
      const nodeLike = resources.map((r) => urnName(r.urn)).filter((n) => n.startsWith(`${this.stack}-cp-`));
      const orphans = nodeLike.filter((n) => !ownerOf(n, listed));
      const withMachine = listed.filter((n) => nodeLike.includes(`${n}-machine`));
      if (orphans.length) return `resources of no listed node: ${orphans.join(", ")}`;
      return withMachine.length === listed.length
        ? undefined
        : `nodes without a machine resource: ${listed.filter((n) => !withMachine.includes(n))}`;
    });
    await check("nodes == lab machines (no orphan machine, namespace or port)", () => {
      const machines = labEndpoints(this.lab)
        .map((e) => e.name)
        .sort();
      const left = labLeftovers(this.lab);
      const ns = left.netns.map((n) => n.replace(`molt-${this.lab.lab}-`, "")).sort();
      if (JSON.stringify(machines) !== JSON.stringify(listed)) return `lab machines [${machines}] vs nodes [${listed}]`;
      if (JSON.stringify(ns) !== JSON.stringify(listed)) return `namespaces [${ns}] vs nodes [${listed}]`;
      if (left.ports.length !== listed.length) return `${left.ports.length} bridge ports for ${listed.length} machines`;
      return JSON.stringify([...left.machineDirs].sort()) === JSON.stringify(listed)
        ? undefined
        : `machine dirs [${left.machineDirs}]`;
    });
    await check("stack not left locked (engine and molt locks)", async () => {
      const store = openStore(this.env.PULUMI_BACKEND_URL, this.env)!;
      const lease = await readLease(store, this.stack);
      const left = [
        ...(lease ? [`molt lease of run ${lease.holder.runId} on ${lease.holder.host}`] : []),
        ...(await engineLocks(store, this.stack)).map((l) => `engine lock ${l.key} (${l.hostname} pid ${l.pid})`),
        ...(await store.list(".molt/locks")).filter((k) => k !== lockKey(this.stack)).map((k) => `stray ${k}`),
      ];
      return left.length ? `locks left in ${store.location}: ${left.join(", ")}` : undefined;
    });
    await check("no process the engine started is left", () => {
      // No run is active now: every engine process of this stack (the CLI, and the plugins
      // it started, which carry its tag) or working in this project is left over, whatever
      // its parent. The harness never kills plugins itself; they must go with their engine.
      const tagged = engineProcessesOf(engineTag(this.env.PULUMI_BACKEND_URL, this.stack));
      const inProject = readdirSync("/proc")
        .filter((p) => /^\d+$/.test(p))
        .map(Number)
        .filter((pid) => {
          try {
            return (
              readlinkSync(`/proc/${pid}/cwd`) === this.suite.wd.dir &&
              /(^|\/)pulumi(-[a-z-]+)?( |$)|dynamic-provider/.test(cmdline(pid)) &&
              !tagged.some((t) => t.pid === pid)
            );
          } catch {
            return false;
          }
        })
        .map((pid) => ({ pid, command: cmdline(pid) }));
      const left = [...tagged, ...inProject];
      return left.length
        ? `engine processes left: ${left.map((p) => `${p.pid} ${p.command.slice(0, 100)}`).join("; ")}`
        : undefined;
    });
    await check("cluster healthy, nothing left to do", async () => {
      const i = await inspect({ stack: this.stack, workDir: this.suite.wd.dir, env: this.env });
      const bad = i.nodes.filter((n) => !n.member || n.member.learner || !n.member.healthy).map((n) => n.name);
      if (bad.length) return `unhealthy: ${bad}`;
      if (i.nodes.length !== 3) return `${i.nodes.length} nodes`;
      return i.next.kind === "done" ? undefined : `next operation: ${i.next.kind}: ${i.next.reason}`;
    });
    return out;
  }

  /** Runs `fn` with a probe, then the invariants; builds the table row. */
  async scenario(
    name: string,
    fn: (r: {
      faults: string[];
      notes: string[];
      runs: { n: number };
      rerunsAfterFault: { n: number };
    }) => Promise<void>,
  ): Promise<ScenarioResult> {
    const t0 = Date.now();
    const faults: string[] = [];
    const notes: string[] = [];
    const runs = { n: 0 };
    const reruns = { n: 0 };
    this.log(`scenario: ${name}`);
    this.trace = [];
    this.stage = `scenario ${name} running`;
    const probe = await this.startProbe();
    let failure: string | undefined;
    try {
      await fn({ faults, notes, runs, rerunsAfterFault: reruns });
    } catch (e) {
      failure = (e as Error).message.split("\n")[0];
    }
    this.stage = `scenario ${name}: stopping the probe and checking the invariants`;
    const report = await probe.stop();
    for (const e of report.errors.slice(0, 5)) notes.push(`probe error: ${e}`);
    for (const e of report.retried.slice(0, 5)) notes.push(`probe round trip retried: ${e}`);
    const invariants = await this.invariants(report);
    if (failure) invariants.unshift({ name: "scenario ran as expected", ok: false, detail: failure });
    const r: ScenarioResult = {
      scenario: name,
      faults,
      runs: runs.n,
      rerunsAfterFault: reruns.n,
      probe: { ok: report.ok, failed: report.failed, longestGapMs: report.longestGapMs },
      invariants,
      notes,
      wallMs: Date.now() - t0,
      ok: invariants.every((i) => i.ok),
    };
    this.stage = undefined;
    for (const i of invariants.filter((x) => !x.ok)) this.log(`  INVARIANT BROKEN: ${i.name}: ${i.detail}`);
    if (!r.ok || process.env.MOLT_CHAOS_TRACE) for (const t of this.trace) this.log(`  ${t}`);
    return r;
  }

  // ---- Scenarios ----

  /**
   * One rollout to the other image, SIGKILLed at each point in turn: each run is armed with
   * the next point and killed there; the next run resumes. Legs repeat (back and forth
   * between images) until every point was hit or a leg passes none.
   */
  killChain(points: KillPoint[], label = "step boundaries"): Promise<ScenarioResult> {
    return this.scenario(`SIGKILL at ${points.length} ${label}`, async ({ faults, notes, runs, rerunsAfterFault }) => {
      let next = 0;
      while (next < points.length) {
        const target = this.other();
        this.setImage(target);
        const hitThisLeg = next;
        for (;;) {
          if (next >= points.length) break;
          const point = points[next];
          const res = await this.runArmed(point);
          runs.n++;
          if (res.killed) {
            faults.push(`${point.id} ${point.what}`);
            this.log(`killed at ${point.id} (${point.what})`);
            next++;
            continue;
          }
          // The run ended without reaching the point: the leg is over.
          if (res.run.code !== 0) throw new Error(`a run after a kill failed: ${summaryOrError(res.run)}`);
          if (point.optional) {
            notes.push(`${point.id} (${point.what}) did not occur in this leg`);
            next++;
          }
          break;
        }
        if (next === hitThisLeg && !points[next]?.optional)
          throw new Error(`no kill point was reached in a whole leg (stuck at ${points[next]?.id})`);
        // Finish the leg (runs until converged).
        const c = await this.converge();
        runs.n += c.runs;
        rerunsAfterFault.n = c.last.code === 0 && summaryOf(c.last).result === "noop" ? c.runs - 1 : c.runs;
        this.settled(target);
      }
    });
  }

  /** One run, killed at `point` if it reaches it. */
  private async runArmed(point: KillPoint): Promise<{ killed: boolean; run: CliRun }> {
    const st: RunState = { op: "" };
    let fired = false;
    const watchers: Promise<void>[] = [];
    let stopWatch = false;
    // The step being watched; it is over at its provision phase. Each decision of the watched
    // operation gets a watch of its own (a run before it may have ended other steps: o04 was
    // never reached while the first surge's phase counted as the end of every later step).
    let watched: { over: boolean } | undefined;
    const handle = this.start((e, kill) => {
      if (e.type === "decision") st.op = (e.operation as { kind: string }).kind;
      if (e.type === "phase" && e.phase === "provision" && watched) watched.over = true;
      if (fired) return;
      if (point.match?.(e, st)) {
        fired = true;
        setTimeout(kill, point.delayMs ?? 0);
      }
      if (point.cluster && e.type === "decision" && st.op === point.cluster.during && (!watched || watched.over)) {
        const step = { over: false };
        watched = step;
        watchers.push(
          this.watchCluster(point.cluster.test, () => stopWatch || fired || step.over).then((hit) => {
            if (hit && !fired) {
              fired = true;
              kill();
            }
          }),
        );
      }
    });
    const run = await handle.done;
    stopWatch = true;
    const ended = run.signal ?? `exit ${run.code}`;
    const before = this.stage;
    const waiting = `waiting for its ${watchers.length} cluster watcher(s)`;
    this.stage = `${before}; run ${this.runCount} ended (${ended}): ${waiting}`;
    await Promise.all(watchers);
    this.stage = before;
    return { killed: fired && run.signal === "SIGKILL", run };
  }

  /** Polls the member list (its own tunnels) until `test` holds or `stop()`. */
  private async watchCluster(
    test: (m: { voters: number; learners: number }) => boolean,
    stop: () => boolean,
  ): Promise<boolean> {
    const st = await this.stored();
    while (!stop()) {
      const eps = labEndpoints(this.lab);
      const access = await EtcdAccess.open(eps, { user: "root", privateKey: st.sshPrivateKey! }).catch(() => undefined);
      if (access) {
        try {
          // Any member answers: not only the oldest machine, which during a prune-and-surge is the
          // retired node, its etcd already out of the cluster (the watcher never saw the learner there: o04).
          let asked = access.nodes()[0];
          while (!stop()) {
            const ms = await access.memberList(asked).catch(async (e: unknown) => {
              for (const n of access.nodes().filter((x) => x !== asked)) {
                const r = await access.memberList(n).catch(() => undefined);
                if (r) {
                  asked = n;
                  return r;
                }
              }
              throw e;
            });
            if (test({ voters: ms.filter((m) => !m.isLearner).length, learners: ms.filter((m) => m.isLearner).length }))
              return true;
            // No reopen when the new machine appears: any old member lists the learner, and a
            // reopen (a second of new SSH sessions) could miss a learner that exists for less
            // (it did once, on an idle machine: "no kill point was reached in a whole leg (stuck
            // at k08)"). A node that goes away fails the call and the loop reopens.
            await new Promise((r) => setTimeout(r, 50)); // poll interval of the watcher
          }
        } catch {
          /* a node went away: reopen */
        } finally {
          await access.close();
        }
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    return false;
  }

  /** A new node whose bootstrap fails: the rollout rolls it back (exit 4), the old nodes untouched. */
  bootstrapFails(image: "lab-broken" | "lab-nossh", what: string): Promise<ScenarioResult> {
    return this.scenario(`bootstrap fails: ${what}`, async ({ faults, notes, runs, rerunsAfterFault }) => {
      const before = (await this.stored()).nodes.map((n) => n.name).sort();
      this.setImage(image, { joinSeconds: 30 });
      faults.push(`image ${image}`);
      const run = await this.rollout();
      runs.n++;
      const s = summaryOf(run);
      notes.push(`exit ${run.code} ${s.result} after ${(s.wallMs / 1000).toFixed(1)} s: ${s.reason.slice(0, 160)}`);
      if (run.code !== 4 || s.result !== "rolled-back")
        throw new Error(`expected rolled-back (exit 4), got exit ${run.code}: ${s.result}: ${s.reason}`);
      const after = (await this.stored()).nodes.map((n) => n.name).sort();
      if (JSON.stringify(after) !== JSON.stringify(before))
        throw new Error(`old nodes changed: [${before}] -> [${after}]`);
      this.setImage(this.current);
      const c = await this.converge();
      runs.n += c.runs;
      rerunsAfterFault.n = 0;
      if (summaryOf(c.last).result !== "noop") notes.push(`the run after it did: ${summaryOf(c.last).result}`);
    });
  }

  /**
   * An old node's etcd dies mid-rollout (after the first new node joined). molt must stop
   * without removing anything and say why; then `molt rollout --replace-dead <node>`
   * replaces it remove-first and the rollout completes.
   */
  oldMemberDies(): Promise<ScenarioResult> {
    return this.scenario(
      "an old member dies mid-rollout; recovery with --replace-dead",
      async ({ faults, notes, runs, rerunsAfterFault }) => {
        const stored = await this.stored();
        // The victim of the fault: the newest old node (the rollout retires the oldest first).
        const victim = [...stored.nodes].sort((a, b) => b.generation - a.generation)[0].name;
        const target = this.other();
        this.setImage(target, { settleSeconds: 15 });
        let killed = false;
        const h = this.start((e) => {
          if (!killed && phase("provision", "surge")(e)) {
            killed = true;
            killEtcdOn(this.lab, victim);
            faults.push(`etcd of ${victim} killed after the first surge`);
          }
        });
        const run = await h.done;
        runs.n++;
        const s = summaryOf(run);
        notes.push(`stopped: exit ${run.code} ${s.result}: ${s.reason.slice(0, 200)}`);
        if (!killed) throw new Error("the fault was never injected");
        if (run.code === 0) throw new Error("the rollout succeeded with a dead member");
        if (!new RegExp(victim).test(s.reason) || !/--replace-dead/.test(s.reason))
          throw new Error(`the stop does not name ${victim} and the recovery: ${s.reason}`);
        const st = await this.stored();
        if (!st.nodes.some((n) => n.name === victim)) throw new Error(`${victim} was removed without being asked to`);
        const rec = await this.rollout(["--replace-dead", victim]);
        runs.n++;
        const rs = summaryOf(rec);
        notes.push(`--replace-dead ${victim}: exit ${rec.code} ${rs.result} in ${(rs.wallMs / 1000).toFixed(1)} s`);
        const kinds = rec.events
          .filter((e) => e.type === "decision")
          .map((e) => (e.operation as { kind: string }).kind)
          .filter((k) => k !== "wait");
        const firstChange = kinds[0];
        if (firstChange !== "remove-member")
          throw new Error(`recovery did not start with removing the dead member: ${kinds.join(",")}`);
        if (rec.code !== 0) throw new Error(`recovery failed: ${rs.reason}`);
        rerunsAfterFault.n = 1;
        this.settled(target);
        this.setImage(target);
      },
    );
  }

  /** The backend folder turns read-only while a surge's `up` runs, then writable again. */
  backendUnwritable(): Promise<ScenarioResult> {
    return this.scenario("backend read-only during `up`", async ({ faults, notes, runs, rerunsAfterFault }) => {
      const state = join(this.suite.wd.dir, "state");
      const target = this.other();
      this.setImage(target);
      let flipped = false;
      let flipping: Promise<unknown> | undefined;
      const h = this.start((e, _kill) => {
        if (flipping || !engine("machine", "creating")(e, { op: "surge" })) return;
        // The kernel refuses a read-only remount while a file on it is open for writing (the
        // engine's checkpoint, a lease renewal): try again until it is taken, for 10 s at most.
        flipping = pollUntil(
          (miss) => {
            try {
              execFileSync("mount", ["-o", "remount,ro", state], { stdio: "pipe" });
            } catch (err) {
              return miss(String((err as { stderr?: Buffer }).stderr ?? err).trim());
            }
            flipped = true;
            faults.push("backend remounted read-only while the machine was being created");
            return true;
          },
          { what: "the backend's read-only remount", deadlineMs: 10_000, intervalMs: 20, maxIntervalMs: 100 },
        ).catch((err: Error) => notes.push(`no fault: ${err.message}`));
      });
      let run: CliRun;
      try {
        run = await h.done;
      } finally {
        await flipping;
        if (flipped) execFileSync("mount", ["-o", "remount,rw", state]);
      }
      await this.afterFault(run, flipped, target, { notes, runs, rerunsAfterFault });
    });
  }

  /** HAProxy is killed and started again while a node is attached to it. */
  lbRestart(): Promise<ScenarioResult> {
    return this.scenario("load balancer restarts mid-rollout", async ({ faults, notes, runs, rerunsAfterFault }) => {
      const target = this.other();
      this.setImage(target);
      let n = 0;
      const h = this.start((e) => {
        if (n < 2 && engine("lb", n === 0 ? "creating" : "deleting")(e, { op: n === 0 ? "surge" : "prune" })) {
          n++;
          restartLb(this.lab);
          faults.push(`HAProxy killed and restarted during an LB ${n === 1 ? "attach" : "detach"}`);
        }
      });
      await this.afterFault(await h.done, n > 0, target, { notes, runs, rerunsAfterFault });
    });
  }

  /** Every established SSH connection to every machine is cut, several times during a rollout. */
  sshDrops(): Promise<ScenarioResult> {
    return this.scenario("SSH connections dropped mid-rollout", async ({ faults, notes, runs, rerunsAfterFault }) => {
      const target = this.other();
      this.setImage(target);
      const at = new Set(["remove-member", "prune", "surge"]);
      const h = this.start((e) => {
        if (e.type !== "decision") return;
        const k = (e.operation as { kind: string }).kind;
        if (!at.has(k)) return;
        at.delete(k);
        // Inside the step: cut a moment after it started.
        setTimeout(
          () => {
            const cut = dropSshSessions(this.lab);
            faults.push(`${cut} SSH session(s) cut during ${k}`);
          },
          k === "surge" ? 1500 : 100,
        );
      });
      const run = await h.done;
      await this.afterFault(run, faults.length > 0, target, { notes, runs, rerunsAfterFault });
    });
  }

  /**
   * Two runners with their own work trees, homes and host names share one bucket. Runner A
   * rolls; runner B, started as soon as A holds the stack, is refused (exit 3). A's molt process alone is
   * SIGKILLed inside the surge's `up` (its engine dies with it: engines are bound on bucket
   * backends). B, right after, is still refused; once A's lease expired by the bucket's
   * clock, B takes the stack over (reported), removes A's engine lock the engine's way,
   * clears what A's engine left pending, and converges.
   */
  twoRunnerKill(): Promise<ScenarioResult> {
    return this.scenario(
      "two runners, one bucket: A SIGKILLed mid-`up`, B refused, B resumes after the lease expired",
      async ({ faults, notes, runs, rerunsAfterFault }) => {
        if (!this.s3) throw new Error("twoRunnerKill needs an S3 backend (ChaosOptions.s3)");
        const target = this.other();
        this.setImage(target);
        const b = this.secondRunner();
        const args = ["rollout", "--stack", this.stack, "--yes", "--json"];
        const runB = () => startCli(args, b.env, undefined, runnerWrap("runner-b")).done;
        let whileA: Promise<CliRun> | undefined;
        let armed = false;
        let killedAt = 0;
        const a = this.start((e) => {
          if (!whileA && e.type === "lock") whileA = runB(); // A holds the stack now
          if (!armed && engine("machine", "creating")(e, { op: "surge" })) {
            armed = true;
            // B's attempt ends first (A is certainly alive while B is refused); then A dies inside `up`.
            // Not awaited (an event handler); `done` never rejects.
            void whileA!.then(() =>
              setTimeout(() => {
                killedAt = Date.now();
                process.kill(a.child.pid!, "SIGKILL"); // molt only: its engine must die with it
              }, 300),
            );
          }
        });
        const aRun = await a.done;
        runs.n++;
        if (aRun.signal !== "SIGKILL") throw new Error(`runner A was not killed: ${summaryOrError(aRun)}`);
        faults.push("runner A's molt process SIGKILLed inside the surge's `up` (machine being created)");
        const refused = await whileA!;
        runs.n++;
        if (refused.code !== 3 || !/runner-a/.test(errorOf(refused)))
          throw new Error(`runner B was not refused while A ran: exit ${refused.code}: ${summaryOrError(refused)}`);
        notes.push(`runner B while A ran: exit 3: ${errorOf(refused).slice(0, 160)}`);
        // Right after the kill A's lease is still live: B is refused again (on a host so loaded that
        // B's own start outlasts the lease, B may find it expired already: then this is the resume).
        const earlyAt = Date.now();
        const early = await runB();
        runs.n++;
        let resumed: CliRun | undefined;
        if (early.code === 3 && /lease expires/.test(errorOf(early)))
          notes.push(
            `runner B ${((earlyAt - killedAt) / 1000).toFixed(1)} s after the kill: exit 3 (lease still live)`,
          );
        else if (early.code === 0) resumed = early;
        else throw new Error(`runner B right after A's death: exit ${early.code}: ${summaryOrError(early)}`);
        // Wait for the lease to expire by the bucket's own clock, then B resumes.
        const store = openStore(this.env.PULUMI_BACKEND_URL, this.env)!;
        await pollUntil(
          async () => {
            const lease = await inspectLease(store, this.stack);
            return !lease?.live ? true : undefined;
          },
          {
            what: "runner A's lease to expire",
            deadlineMs: ((this.lockSeconds ?? 30) + 30) * 1000,
            maxIntervalMs: 500,
          },
        );
        const resumedAt = Date.now();
        if (!resumed) {
          resumed = await runB();
          runs.n++;
        }
        const kinds = (t: string) => resumed!.events.filter((e) => e.type === t);
        const recovered = kinds("lock-recovered")[0] as { reason?: string; previousHost?: string } | undefined;
        notes.push(
          `runner B ${((resumedAt - killedAt) / 1000).toFixed(1)} s after the kill (lease expired by the bucket's ` +
            `clock), ${((Date.now() - resumedAt) / 1000).toFixed(1)} s: exit ${resumed.code}: ` +
            `${summaryOrError(resumed).slice(0, 120)}; lock: ${JSON.stringify(recovered)}; ` +
            `engine locks cleared: ${JSON.stringify(kinds("engine-lock-cleared").map((e) => e.locks))}; ` +
            `pending cleared: ${pendingCleared(kinds("pending-cleared"))}`,
        );
        this.resumedFromA(resumed, recovered, target, rerunsAfterFault);
        b.cleanup();
      },
    );
  }

  /**
   * Two runners create the stack at once (molt:lock.in cluster: no cluster, so no etcd to
   * hold the lease yet). Exactly one creates it and converges; the other stops with exit 3
   * having changed nothing: the engine's own lock (their `up`s overlapped), the state guard
   * (its `up` came after the winner's, decided on the empty stack), or the lease in the new
   * etcd. Returns what happened, for the scenario's notes.
   */
  async racedCreate(): Promise<string[]> {
    this.setImage(this.images[0]);
    const b = this.secondRunner();
    const args = ["rollout", "--stack", this.stack, "--yes", "--json"];
    const [ra, rb] = await Promise.all([this.rollout(), startCli(args, b.env, undefined, runnerWrap("runner-b")).done]);
    // B's work tree stays until the teardown: the lab's HAProxy, started by B's engine if B made
    // the stack, runs in it (its reloads re-exec there).
    this.cleanups.push(b.cleanup);
    const codes = [ra.code, rb.code].sort();
    if (JSON.stringify(codes) !== JSON.stringify([0, 3])) {
      for (const [n, r] of [
        ["A", ra],
        ["B", rb],
      ] as const)
        if (r.code !== 0)
          this.log(
            `runner ${n} exit ${r.code}: last events ${r.events
              .slice(-12)
              .map((e) => JSON.stringify(e).slice(0, 400))
              .join("\n")}\nstderr ${r.stderr.slice(-1500)}`,
          );
      throw new Error(
        "two runners creating one stack: want one exit 0 and one exit 3, " +
          `got A ${ra.code} (${errorOf(ra).slice(0, 200)}), ` +
          `B ${rb.code} (${errorOf(rb).slice(0, 200)})`,
      );
    }
    const [won, lost] = ra.code === 0 ? [ra, rb] : [rb, ra];
    this.createdWith = won.events.filter((e) => e.type === "lock").map((e) => String((e as { scope?: string }).scope));
    const name = (r: CliRun) => (r === ra ? "A" : "B");
    return [
      `created by two runners at once: runner ${name(won)} exit 0 (lock events ${this.createdWith.join(" -> ")}); ` +
        `runner ${name(lost)} exit 3: ${errorOf(lost).slice(0, 220)}`,
    ];
  }

  /**
   * The lease in the cluster (molt:lock.in cluster, as on Pulumi Cloud or gs://), two runners
   * with their own host names, work trees and homes. Runner A rolls; runner B, started once A
   * holds the lease in etcd, is refused (exit 3). A's molt process is SIGKILLed at the
   * boundary after the surge (no engine in flight: on a file backend another host's engine
   * lock is never guessed dead). B is refused again right after; once etcd let A's lease go,
   * B takes the stack (reported) and converges.
   */
  clusterLockKill(): Promise<ScenarioResult> {
    return this.scenario(
      "lease in the cluster's etcd: B refused while A rolls, A SIGKILLed, B resumes once etcd let A's lease go",
      async ({ faults, notes, runs, rerunsAfterFault }) => {
        if (this.lockIn !== "cluster") throw new Error("clusterLockKill needs ChaosOptions.lockIn cluster");
        if (JSON.stringify(this.createdWith) !== JSON.stringify(["cluster-pending", "cluster"]))
          throw new Error(`creating the stack did not take its lease in the new cluster: ${this.createdWith}`);
        notes.push(...this.createdNotes);
        const target = this.other();
        this.setImage(target);
        const b = this.secondRunner();
        const args = ["rollout", "--stack", this.stack, "--yes", "--json"];
        const runB = () => startCli(args, b.env, undefined, runnerWrap("runner-b")).done;
        let whileA: Promise<CliRun> | undefined;
        let refusedFirst = false;
        let surged = false;
        let killedAt = 0;
        const a = this.start((e, kill) => {
          if (!whileA && e.type === "lock" && (e as { scope?: string }).scope === "cluster")
            whileA = runB().then((r) => ((refusedFirst = true), r));
          const op = e.type === "decision" ? (e as { operation?: { kind?: string } }).operation?.kind : undefined;
          if (op === "surge") surged = true;
          else if (op && surged && refusedFirst && !killedAt) {
            killedAt = Date.now();
            kill();
          }
        });
        const aRun = await a.done;
        runs.n++;
        if (aRun.signal !== "SIGKILL") throw new Error(`runner A was not killed: ${summaryOrError(aRun)}`);
        faults.push("runner A's molt process SIGKILLed at the decision after its surge");
        const refused = await whileA!;
        runs.n++;
        if (refused.code !== 3 || !/runner-a/.test(errorOf(refused)))
          throw new Error(`runner B was not refused while A ran: exit ${refused.code}: ${summaryOrError(refused)}`);
        notes.push(`runner B while A ran: exit 3: ${errorOf(refused).slice(0, 200)}`);
        let resumed: CliRun | undefined;
        for (let attempt = 1; !resumed; attempt++) {
          const at = Date.now();
          const r = await runB();
          runs.n++;
          const after = ((at - killedAt) / 1000).toFixed(1);
          if (r.code === 3 && /lease expires/.test(errorOf(r)) && attempt < 8) {
            notes.push(`runner B ${after} s after the kill: exit 3 (A's etcd lease still live)`);
            await new Promise((res) => setTimeout(res, 3000));
            continue;
          }
          resumed = r;
          const recovered = r.events.find((e) => e.type === "lock-recovered") as
            { reason?: string; previousHost?: string } | undefined;
          notes.push(
            `runner B ${after} s after the kill, ${((Date.now() - at) / 1000).toFixed(1)} s: exit ${r.code}: ` +
              `${summaryOrError(r).slice(0, 120)}; lock: ${JSON.stringify(recovered)}`,
          );
          this.resumedFromA(r, recovered, target, rerunsAfterFault);
        }
        b.cleanup();
      },
    );
  }

  /** Runner B converged on `target`, reporting that it took over runner A's expired lease. */
  private resumedFromA(
    run: CliRun,
    recovered: { reason?: string; previousHost?: string } | undefined,
    target: string,
    rerunsAfterFault: { n: number },
  ): void {
    if (run.code !== 0) throw new Error(`runner B did not converge: ${summaryOrError(run)}`);
    if (recovered?.reason !== "expired" || recovered.previousHost !== "runner-a")
      throw new Error(`runner B did not report taking over A's expired lease: ${JSON.stringify(recovered)}`);
    rerunsAfterFault.n = 1;
    this.settled(target);
  }

  /** Runner B: a work tree, home and stack file of its own (a fresh CI checkout), the same backend and passphrase. */
  private secondRunner(): { env: Record<string, string>; cleanup: () => void } {
    const wd = makeWorkDir("molt-runner-b-");
    const home = join(wd.dir, "home");
    mkdirSync(home);
    wd.writeStackConfig(
      this.stack,
      readFileSync(join(this.suite.wd.dir, "stacks", `Pulumi.${this.stack}.yaml`), "utf8"),
    );
    return {
      env: {
        PULUMI_BACKEND_URL: this.env.PULUMI_BACKEND_URL,
        PULUMI_CONFIG_PASSPHRASE: this.env.PULUMI_CONFIG_PASSPHRASE,
        ...(this.s3?.credentials ?? {}),
        MOLT_PROJECT_DIR: wd.dir,
        MOLT_HOME: home,
        HOME: home,
        MOLT_CACHE: cacheDir(),
      },
      cleanup: () => wd.cleanup(),
    };
  }

  /** The faulted run is recorded; if it did not converge itself, reruns until it does. */
  private async afterFault(
    run: CliRun,
    injected: boolean,
    target: string,
    r: { notes: string[]; runs: { n: number }; rerunsAfterFault: { n: number } },
  ): Promise<void> {
    r.runs.n++;
    r.notes.push(`faulted run: exit ${run.code}: ${summaryOrError(run).slice(0, 200)}`);
    if (!injected) throw new Error("the fault was never injected");
    r.rerunsAfterFault.n = 0;
    if (run.code !== 0) {
      const c = await this.converge();
      r.runs.n += c.runs;
      r.rerunsAfterFault.n = c.runs;
    }
    this.settled(target);
  }

  async teardown(): Promise<void> {
    await this.suite.teardown().catch(() => undefined);
    for (const c of this.cleanups.splice(0)) c();
    if (this.stateMount) {
      try {
        execFileSync("umount", [join(this.suite.wd.dir, "state")]);
      } catch {
        /* already gone with the directory */
      }
    }
  }
}

function pendingCleared(events: Event[]): string {
  return events.length ? JSON.stringify(events[0].operations).slice(0, 300) : "none";
}

function summaryOrError(run: CliRun): string {
  const s = run.events.find((e) => e.type === "summary") as { result?: string; reason?: string } | undefined;
  if (s) return `${s.result}: ${s.reason}`;
  const err = run.events.find((e) => e.type === "error") as { message?: string } | undefined;
  return err?.message ?? (run.signal ? `killed (${run.signal})` : `no summary; stderr: ${run.stderr.slice(-300)}`);
}

/** The pids of a lab machine (its network namespace). */
function machinePids(lab: LabSettings, name: string): number[] {
  return execFileSync("ip", ["netns", "pids", `molt-${lab.lab}-${name}`], { encoding: "utf8" })
    .split(/\s+/)
    .filter(Boolean)
    .map(Number);
}

const comm = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/comm`, "utf8").trim();
  } catch {
    return "";
  }
};
const cmdline = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ");
  } catch {
    return "";
  }
};

/** SIGKILLs the etcd process on one machine (nothing restarts it: the member is dead). */
export function killEtcdOn(lab: LabSettings, name: string): void {
  const pids = machinePids(lab, name).filter((p) => comm(p) === "etcd");
  if (pids.length === 0) throw new Error(`no etcd running on ${name}`);
  for (const p of pids) process.kill(p, "SIGKILL");
}

/** Cuts every established SSH connection to the lab's machines (the listeners stay). */
export function dropSshSessions(lab: LabSettings): number {
  let cut = 0;
  for (const ep of labEndpoints(lab)) {
    let pids: number[] = [];
    try {
      pids = machinePids(lab, ep.name);
    } catch {
      continue;
    }
    for (const p of pids) {
      // Per-connection sshd processes ("sshd: root@notty", "sshd: root [priv]"), not the listener (-D).
      if (comm(p) === "sshd" && !cmdline(p).includes(" -D")) {
        try {
          process.kill(p, "SIGKILL");
          cut++;
        } catch {
          /* gone */
        }
      }
    }
  }
  return cut;
}

/** Kills the lab's HAProxy and starts it again with its configuration (like a service restart). */
export function restartLb(lab: LabSettings): void {
  const dir = join(lab.labRoot, "labs", lab.lab, "lb");
  const cfg = join(dir, "haproxy.cfg");
  // Master and workers: a crashed load balancer leaves nothing serving.
  for (const pid of readdirSync("/proc")
    .filter((p) => /^\d+$/.test(p))
    .map(Number)) {
    if (comm(pid) === "haproxy" && cmdline(pid).includes(cfg)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        /* gone */
      }
    }
  }
  execFileSync("haproxy", ["-W", "-D", "-f", cfg, "-p", join(dir, "haproxy.pid")]);
}

/** The table the issue asks for. */
export function formatTable(rows: ScenarioResult[]): string {
  const header = [
    "scenario",
    "faults",
    "runs",
    "reruns after fault",
    "probe ok/failed",
    "longest gap",
    "invariants",
    "wall",
  ];
  const data = rows.map((r) => [
    r.scenario,
    String(r.faults.length),
    String(r.runs),
    String(r.rerunsAfterFault),
    `${r.probe.ok}/${r.probe.failed}`,
    `${(r.probe.longestGapMs / 1000).toFixed(1)} s`,
    r.ok
      ? `all ${r.invariants.length} held`
      : `BROKEN: ${r.invariants
          .filter((i) => !i.ok)
          .map((i) => i.name)
          .join("; ")}`,
    `${(r.wallMs / 1000).toFixed(0)} s`,
  ]);
  const w = header.map((h, i) => Math.max(h.length, ...data.map((d) => d[i].length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(w[i])).join(" | ")} |`;
  return [line(header), line(w.map((n) => "-".repeat(n))), ...data.map(line)].join("\n");
}
