// `npm run bench`: how fast a rollout is on the lab, where the time goes, how it scales,
// and how it compares with the fixed pacing of today's tools — measured, side by side.
// Prints a table, writes bench/results/latest.json and bench/results/timeline.svg.
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { buildProgram } from "../infra/program";
import type { LabSettings } from "../infra/lab/node";
import { SshSession } from "../infra/remote/ssh";
import { EtcdAccess } from "../orchestrator/edges/etcd";
import type { RolloutEvent } from "../orchestrator/events";
import type { Operation } from "../orchestrator/model";
import { readStoredState } from "../orchestrator/observe";
import { rollout, type Summary } from "../orchestrator/rollout";
import { openStack } from "../orchestrator/stack/driver";
import { makeWorkDir, type TestWorkDir } from "../test/support/workdir";

const LAB_ROOT = process.env.MOLT_LAB_ROOT ?? "/var/lib/molt-lab";
const outDir = resolve(__dirname, "..", "..", "bench", "results");
const quick = process.argv.includes("--quick");
const dataMiB = Number(process.env.MOLT_BENCH_DATA_MIB ?? (quick ? 64 : 1024));

function lab(id: number): LabSettings {
  return { lab: `b${id}`, labRoot: LAB_ROOT, bridge: `moltbr-b${id}`, subnet: `10.77.${200 + id}.0/24`, lbPort: 6443 };
}

function stackYaml(l: LabSettings, replicas: number, image: string): string {
  return `config:\n  molt:provider: lab\n  molt:replicas: ${replicas}\n  molt:image: ${image}\n  molt:timeouts:\n    joinSeconds: 900\n  molt:lab:\n    name: ${l.lab}\n    bridge: ${l.bridge}\n    subnet: ${l.subnet}\n`;
}

interface Run {
  summary: Summary;
  events: (RolloutEvent & { at: number })[];
  rssPeakMiB: number;
  cpuUserMs: number;
  cpuSystemMs: number;
}

async function measuredRollout(wd: TestWorkDir, stack: string, hook?: (op: Operation) => Promise<void>): Promise<Run> {
  const events: (RolloutEvent & { at: number })[] = [];
  let rssPeak = process.memoryUsage().rss;
  const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, process.memoryUsage().rss)), 100);
  const cpu0 = process.cpuUsage();
  try {
    const summary = await rollout({
      stack,
      workDir: wd.dir,
      env: wd.env,
      onEvent: (e) => events.push({ ...e, at: Date.now() }),
      ...(hook ? { beforeOperation: (op) => hook(op) } : {}),
    });
    const cpu = process.cpuUsage(cpu0);
    if (summary.result !== "succeeded" && summary.result !== "noop") throw new Error(`rollout ${summary.result}: ${summary.reason}`);
    return { summary, events, rssPeakMiB: Math.round(rssPeak / 2 ** 20), cpuUserMs: Math.round(cpu.user / 1000), cpuSystemMs: Math.round(cpu.system / 1000) };
  } finally {
    clearInterval(sampler);
  }
}

async function destroy(wd: TestWorkDir, stack: string): Promise<void> {
  const s = await openStack({ stackName: stack, workDir: wd.dir, env: wd.env, create: false, program: async () => ({}) });
  await s.destroy();
}

const pct = (xs: number[], p: number) => {
  const a = [...xs].sort((x, y) => x - y);
  return a.length ? a[Math.min(a.length - 1, Math.floor((p / 100) * a.length))] : 0;
};
const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);
const phaseMs = (r: Run, op: string) => r.events.filter((e) => e.type === "phase" && e.phase === "provision" && e.operation === op).map((e) => (e as { ms: number }).ms);

/** Gate latency: from the end of the step that made a condition true to molt's next decision. */
function gateLatencies(r: Run): number[] {
  const out: number[] = [];
  for (let i = 0; i < r.events.length; i++) {
    const e = r.events[i];
    if (e.type !== "phase" || e.phase === "observe" || e.phase === "snapshot") continue;
    const next = r.events.slice(i + 1).find((x) => x.type === "decision");
    if (next) out.push(next.at - e.at);
  }
  return out;
}

function timelineSvg(r: Run, title: string): string {
  const phases = r.events.filter((e) => e.type === "phase") as (Extract<RolloutEvent, { type: "phase" }> & { at: number })[];
  if (phases.length === 0) return "";
  const t0 = Math.min(...phases.map((p) => p.at - p.ms));
  const t1 = Math.max(...phases.map((p) => p.at));
  const nodes = [...new Set(phases.map((p) => p.node ?? "cluster"))];
  const W = 900, rowH = 26, left = 130, top = 40;
  const x = (t: number) => left + ((t - t0) / Math.max(1, t1 - t0)) * (W - left - 20);
  const colour: Record<string, string> = { provision: "#4e79a7", etcd: "#f28e2b", wait: "#bab0ac", snapshot: "#59a14f" };
  const bars = phases.map((p) => {
    const y = top + nodes.indexOf(p.node ?? "cluster") * rowH;
    const w = Math.max(2, x(p.at) - x(p.at - p.ms));
    return `<rect x="${x(p.at - p.ms).toFixed(1)}" y="${y}" width="${w.toFixed(1)}" height="${rowH - 8}" fill="${colour[p.phase] ?? "#999"}"><title>${p.operation} ${p.node ?? ""} ${(p.ms / 1000).toFixed(1)}s</title></rect>`;
  });
  const labels = nodes.map((n, i) => `<text x="8" y="${top + i * rowH + 13}" font-size="12">${n}</text>`);
  const ticks = Array.from({ length: 11 }, (_, i) => {
    const t = t0 + ((t1 - t0) * i) / 10;
    return `<line x1="${x(t)}" y1="${top - 6}" x2="${x(t)}" y2="${top + nodes.length * rowH}" stroke="#eee"/><text x="${x(t)}" y="${top - 10}" font-size="10" text-anchor="middle">${((t - t0) / 1000).toFixed(0)}s</text>`;
  });
  const legend = Object.entries(colour).map(([k, c], i) => `<rect x="${left + i * 110}" y="${top + nodes.length * rowH + 10}" width="12" height="12" fill="${c}"/><text x="${left + i * 110 + 16}" y="${top + nodes.length * rowH + 21}" font-size="12">${k}</text>`);
  const H = top + nodes.length * rowH + 40;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif"><rect width="100%" height="100%" fill="white"/><text x="8" y="18" font-size="14" font-weight="bold">${title}</text>${ticks.join("")}${labels.join("")}${bars.join("")}${legend.join("")}</svg>`;
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error("the bench runs on the lab, which needs root");
  mkdirSync(outDir, { recursive: true });
  const result: Record<string, unknown> = { date: new Date().toISOString(), quick, machine: { cpus: require("node:os").cpus().length } };
  const rows: [string, string][] = [];
  // The JSON is rewritten after every figure, so a run stopped part-way keeps what it measured.
  const save = () => writeFileSync(join(outDir, "latest.json"), JSON.stringify({ ...result, table: rows }, null, 2));
  const say = (k: string, v: string) => {
    rows.push([k, v]);
    console.log(`${k.padEnd(52)} ${v}`);
    save();
  };

  // 1 + 3 + 6: a 3-node rollout, phase by phase; gate latency; the orchestrator's cost.
  const scaling: Record<number, { surgeMs: number; pruneMs: number; stepMs: number; wallMs: number }> = {};
  let three: Run | undefined;
  for (const [i, n] of (quick ? [3, 5] : [3, 5, 7]).entries()) {
    const l = lab(i + 1);
    const wd = makeWorkDir(`molt-bench-${n}-`);
    const stack = `bench${n}`;
    try {
      wd.writeStackConfig(stack, stackYaml(l, n, "lab-v1"));
      const created = await measuredRollout(wd, stack);
      wd.writeStackConfig(stack, stackYaml(l, n, "lab-v2"));
      const r = await measuredRollout(wd, stack);
      const surge = mean(phaseMs(r, "surge"));
      const prune = mean(phaseMs(r, "prune"));
      scaling[n] = { surgeMs: Math.round(surge), pruneMs: Math.round(prune), stepMs: Math.round((surge + prune) / 2), wallMs: r.summary.wallMs };
      say(`${n} nodes: create wall`, `${(created.summary.wallMs / 1000).toFixed(1)} s`);
      say(`${n} nodes: rollout wall / per surge up / per prune up`, `${(r.summary.wallMs / 1000).toFixed(1)} s / ${(surge / 1000).toFixed(1)} s / ${(prune / 1000).toFixed(1)} s`);
      if (n === 3) three = r;
    } finally {
      await destroy(wd, stack).catch((e) => console.error("destroy:", (e as Error).message.split("\n")[0]));
      wd.cleanup();
    }
  }
  const r3 = three!;
  const p = r3.summary.phases;
  const wall = r3.summary.wallMs;
  const overhead = (p.molt + p.observe) / wall;
  say("3-node rollout: wall", `${(wall / 1000).toFixed(1)} s`);
  say("  provisioning (pulumi up: surge + prune, incl. bootstrap/join)", `${(p.provision / 1000).toFixed(1)} s (${((100 * p.provision) / wall).toFixed(0)}%)`);
  say("  etcd membership calls (move-leader, remove, promote)", `${(p.etcd / 1000).toFixed(2)} s`);
  say("  waiting on conditions", `${(p.wait / 1000).toFixed(1)} s`);
  say("  snapshot", `${(p.snapshot / 1000).toFixed(2)} s`);
  say("  observing (state read + etcd status over SSH)", `${(p.observe / 1000).toFixed(1)} s (${((100 * p.observe) / wall).toFixed(0)}%)`);
  say("  molt itself (everything else)", `${(p.molt / 1000).toFixed(1)} s (${((100 * p.molt) / wall).toFixed(0)}%)`);
  say("  molt overhead share (observe + molt)", `${(100 * overhead).toFixed(1)}%`);
  const gates = gateLatencies(r3);
  say("gate latency p50 / p95 (condition true -> next decision)", `${pct(gates, 50)} ms / ${pct(gates, 95)} ms`);
  say("orchestrator process: peak RSS / CPU user+sys", `${r3.rssPeakMiB} MiB / ${((r3.cpuUserMs + r3.cpuSystemMs) / 1000).toFixed(1)} s`);
  const biggest = Math.max(...Object.keys(scaling).map(Number));
  const ratio = scaling[biggest].stepMs / scaling[3].stepMs;
  say(`per-step ratio ${biggest}-node / 3-node`, ratio.toFixed(2));
  writeFileSync(join(outDir, "timeline.svg"), timelineSvg(r3, `molt: 3-node lab rollout lab-v1 -> lab-v2 (${(wall / 1000).toFixed(0)} s)`));
  Object.assign(result, { phases3: p, wall3Ms: wall, overheadShare: overhead, gateLatencyMs: { p50: pct(gates, 50), p95: pct(gates, 95), n: gates.length }, orchestrator: { rssPeakMiB: r3.rssPeakMiB, cpuUserMs: r3.cpuUserMs, cpuSystemMs: r3.cpuSystemMs }, scaling, stepRatio: ratio });

  // 5: the same rollout paced like today's tools, in this process, on the same lab.
  const l = lab(9);
  const baselines: Record<string, number> = {};
  for (const [name, hook] of [
    ["molt", undefined],
    // KubeOne: a fixed 30 s sleep between nodes, no check.
    ["kubeone-pacing", async (op: Operation) => {
      if (op.kind === "surge") await sleepFixed(30_000);
    }],
    // kops: after each replaced node, validate on 30 s ticks until 2 consecutive successes 10 s apart.
    ["kops-pacing", async (op: Operation) => {
      if (op.kind === "surge") {
        await sleepFixed(30_000 - (Date.now() % 30_000));
        await sleepFixed(10_000);
      }
    }],
  ] as [string, ((op: Operation) => Promise<void>) | undefined][]) {
    const wd = makeWorkDir(`molt-bench-${name}-`);
    try {
      wd.writeStackConfig("base", stackYaml(l, 3, "lab-v1"));
      await measuredRollout(wd, "base");
      wd.writeStackConfig("base", stackYaml(l, 3, "lab-v2"));
      const r = await measuredRollout(wd, "base", hook);
      baselines[name] = r.summary.wallMs;
      say(`same rollout, ${name}`, `${(r.summary.wallMs / 1000).toFixed(1)} s`);
    } finally {
      await destroy(wd, "base").catch(() => undefined);
      wd.cleanup();
    }
  }
  say("molt / kubeone-pacing", (baselines.molt / baselines["kubeone-pacing"]).toFixed(2));
  say("molt / kops-pacing", (baselines.molt / baselines["kops-pacing"]).toFixed(2));
  result.baselines = baselines;

  // 4: catch-up of a large keyspace.
  {
    const lc = lab(8);
    const wd = makeWorkDir("molt-bench-catchup-");
    try {
      wd.writeStackConfig("big", stackYaml(lc, 3, "lab-v1"));
      await measuredRollout(wd, "big");
      const stack = await openStack({ stackName: "big", workDir: wd.dir, env: wd.env, create: false, program: buildProgram({ provider: "lab", nodes: [], sshUser: "root", lab: lc, joinDeadlineSeconds: 900 }) });
      const st = await readStoredState(stack);
      const access = await EtcdAccess.open(st.endpoints, { user: st.sshUser, privateKey: st.sshPrivateKey! });
      const tw = Date.now();
      const client = access.voters(access.nodes());
      const value = Buffer.alloc(1 << 20, 7);
      for (let i = 0; i < dataMiB; i++) await client.put(`bench/blob/${i}`).value(value);
      const writeMs = Date.now() - tw;
      // Raw copy time of the same data: stream the member's database file off a node over SSH.
      const ep = st.endpoints[0];
      const ssh = await SshSession.connect({ host: ep.sshHost, port: ep.sshPort, user: st.sshUser, privateKey: st.sshPrivateKey!, hostKey: ep.hostPublicKey });
      const dbBytes = Number((await ssh.run("stat -c %s /var/lib/etcd/member/snap/db", "db size")).trim());
      const tc = Date.now();
      await ssh.run("cat /var/lib/etcd/member/snap/db | wc -c", "raw copy");
      const rawMs = Date.now() - tc;
      ssh.close();
      await access.close();
      wd.writeStackConfig("big", stackYaml(lc, 3, "lab-v2"));
      const r = await measuredRollout(wd, "big");
      const joins = phaseMs(r, "surge");
      say(`catch-up: ${dataMiB} MiB written in`, `${(writeMs / 1000).toFixed(1)} s (db ${(dbBytes / 2 ** 20).toFixed(0)} MiB)`);
      say("catch-up: join incl. catch-up per node (mean) / raw copy of the db", `${(mean(joins) / 1000).toFixed(1)} s / ${(rawMs / 1000).toFixed(1)} s`);
      say("catch-up: rollout wall with the large keyspace", `${(r.summary.wallMs / 1000).toFixed(1)} s`);
      const after = await readStoredState(stack);
      const a2 = await EtcdAccess.open(after.endpoints, { user: after.sshUser, privateKey: after.sshPrivateKey! });
      const c2 = a2.voters(a2.nodes());
      const count = await c2.getAll().prefix("bench/blob/").count();
      const rev = (await c2.put("bench/marker").value("x").exec()).header.revision;
      const hashes = new Set((await Promise.all(a2.nodes().map((n) => a2.hashKV(n, rev)))).map((h) => h.hash));
      await a2.close();
      say("catch-up: keys present after rollout / hashKV equal on all members", `${count}/${dataMiB} / ${hashes.size === 1 ? "yes" : "NO"}`);
      result.catchUp = { dataMiB, dbBytes, writeMs, joinMs: joins, rawCopyMs: rawMs, wallMs: r.summary.wallMs, keysAfter: count, hashKvEqual: hashes.size === 1 };
    } finally {
      await destroy(wd, "big").catch(() => undefined);
      wd.cleanup();
    }
  }

  save();
  console.log(`\nwrote ${join(outDir, "latest.json")} and ${join(outDir, "timeline.svg")}`);
}

/** The baselines' fixed pacing: the very thing molt avoids, modelled here to compare. */
function sleepFixed(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
