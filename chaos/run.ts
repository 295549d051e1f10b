// `npm run chaos`: every chaos scenario on its own lab, then the table. `-- --quick` runs
// the CI subset (the kill points of CI_KILL_POINTS and one bootstrap failure).
// Writes chaos/results/latest.json. Needs root (the lab), like the e2e tests.
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { testLab } from "../test/support/lab";
import { startS3Server } from "../test/support/s3";
import {
  Chaos,
  CI_KILL_POINTS,
  formatTable,
  KILL_POINTS,
  KUBE_KILL_POINTS,
  OVERLAP_KILL_POINTS,
  type ChaosOptions,
  type KillPoint,
  type ScenarioResult,
} from "./harness";

async function main(): Promise<number> {
  const quick = process.argv.includes("--quick");
  // --only kill,member-dies,kube: run just these scenarios (ids above; "kube" is the Kubernetes chain,
  // "two-runners" two runners sharing an S3 bucket, "cluster-lock" two runners and a lease in the
  // cluster's etcd, "overlap" kills inside prune-and-surge).
  const onlyAt = process.argv.indexOf("--only");
  const only = onlyAt > 0 ? (process.argv[onlyAt + 1] ?? "").split(",") : [];
  // --points k04,k16: only these kill points in the kill chain; --lab N: lab id (default 6).
  const arg = (name: string) =>
    process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : undefined;
  const pointIds = arg("--points")?.split(",");
  const labId = Number(arg("--lab") ?? 6);
  if (!Number.isInteger(labId) || labId < 1 || labId > 99) throw new Error(`--lab ${arg("--lab")}: a lab id 1-99`);
  const unknown = pointIds?.filter((id) => !KILL_POINTS.some((p) => p.id === id)) ?? [];
  if (unknown.length)
    throw new Error(`--points: no kill point ${unknown.join(", ")} (known: k01..k${KILL_POINTS.length})`);
  const chaos = new Chaos({
    lab: testLab(labId),
    log: (l) => console.log(`${new Date().toISOString().slice(11, 19)}  ${l}`),
  });
  const rows: ScenarioResult[] = [];
  const outDir = resolve(__dirname, "..", "..", "chaos", "results");
  mkdirSync(outDir, { recursive: true });
  const save = () =>
    writeFileSync(
      join(outDir, "latest.json"),
      JSON.stringify({ when: new Date().toISOString(), quick, rows }, null, 2) + "\n",
    );
  try {
    const local = ["kill", "etcd-never-starts", "ssh-never-up", "member-dies", "backend-ro", "lb-restart", "ssh-drops"];
    if (only.length === 0 || only.some((o) => local.includes(o))) await chaos.create();
    const points = pointIds
      ? KILL_POINTS.filter((p) => pointIds.includes(p.id))
      : quick
        ? KILL_POINTS.filter((p) => CI_KILL_POINTS.includes(p.id))
        : KILL_POINTS;
    const all: [string, () => Promise<ScenarioResult>][] = [
      ["kill", () => chaos.killChain(points)],
      ["etcd-never-starts", () => chaos.bootstrapFails("lab-broken", "etcd never starts")],
      ["ssh-never-up", () => chaos.bootstrapFails("lab-nossh", "SSH never comes up")],
      ["member-dies", () => chaos.oldMemberDies()],
      ["backend-ro", () => chaos.backendUnwritable()],
      ...(quick
        ? []
        : ([
            ["lb-restart", () => chaos.lbRestart()],
            ["ssh-drops", () => chaos.sshDrops()],
          ] as [string, () => Promise<ScenarioResult>][])),
    ];
    const steps = all.filter(([id]) => only.length === 0 || only.includes(id)).map(([, f]) => f);
    for (const step of steps) {
      rows.push(await step());
      save();
      console.log(formatTable(rows.slice(-1)));
    }
  } finally {
    await chaos.teardown();
  }
  // Two runners sharing an S3 bucket (issue #20), on a lab and an S3 server of their own.
  if (!quick && (only.length === 0 || only.includes("two-runners"))) {
    const s3 = await startS3Server(["molt-state"]);
    const shared = new Chaos({
      lab: testLab(13),
      stack: "shared",
      s3,
      lockSeconds: 15,
      log: (l) => console.log(`${new Date().toISOString().slice(11, 19)}  ${l}`),
    });
    try {
      await shared.create();
      rows.push(await shared.twoRunnerKill());
      save();
      console.log(formatTable(rows.slice(-1)));
    } finally {
      await shared.teardown();
      await s3.stop();
    }
  }
  // The lease in the cluster's etcd (molt:lock.in cluster, as on Pulumi Cloud or gs://), two runners (issue #20).
  if (!quick && (only.length === 0 || only.includes("cluster-lock"))) {
    const c = new Chaos({
      lab: testLab(19),
      stack: "clock",
      lockIn: "cluster",
      lockSeconds: 15,
      log: (l) => console.log(`${new Date().toISOString().slice(11, 19)}  ${l}`),
    });
    try {
      c.createdNotes = await c.racedCreate();
      rows.push(await c.clusterLockKill());
      save();
      console.log(formatTable(rows.slice(-1)));
    } finally {
      await c.teardown();
    }
  }
  // A kill chain on a lab and stack of its own: one row of the table.
  const chainOnItsOwn = async (o: ChaosOptions, points: KillPoint[], label: string) => {
    const chain = new Chaos({ ...o, log: (l) => console.log(`${new Date().toISOString().slice(11, 19)}  ${l}`) });
    try {
      await chain.create();
      rows.push(await chain.killChain(points, label));
      save();
      console.log(formatTable(rows.slice(-1)));
    } finally {
      await chain.teardown();
    }
  };
  // molt:rollout.pruneWithNextSurge: kills inside the one engine run that adds a node and
  // destroys a retired one, on a lab of its own (issue #14).
  if (!quick && (only.length === 0 || only.includes("overlap")))
    await chainOnItsOwn(
      { lab: testLab(15), stack: "overlap", pruneWithNextSurge: true },
      OVERLAP_KILL_POINTS,
      "prune-and-surge boundaries (pruneWithNextSurge)",
    );
  // Kubernetes steps, on a control plane of their own (full run only; MOLT_CHAOS_KUBE=0 skips).
  if (!quick && process.env.MOLT_CHAOS_KUBE !== "0" && (only.length === 0 || only.includes("kube")))
    await chainOnItsOwn(
      { lab: testLab(7), stack: "kchaos", images: ["k8s-v1.36.3", "k8s-v1.37.2", "k8s-v1.37.2-os2"] },
      KUBE_KILL_POINTS,
      "Kubernetes step boundaries (1.36 → 1.37)",
    );
  console.log("\n" + formatTable(rows));
  for (const r of rows) {
    console.log(`\n${r.scenario}:`);
    for (const f of r.faults) console.log(`  fault: ${f}`);
    for (const n of r.notes) console.log(`  note: ${n}`);
    for (const i of r.invariants)
      console.log(`  ${i.ok ? "held  " : "BROKEN"} ${i.name}${i.detail ? `: ${i.detail}` : ""}`);
  }
  return rows.every((r) => r.ok) ? 0 : 1;
}

main().then(
  (c) => process.exit(c),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
