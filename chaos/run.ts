// `npm run chaos`: every chaos scenario on its own lab, then the table. `-- --quick` runs
// the CI subset (the kill points of CI_KILL_POINTS and one bootstrap failure).
// Writes chaos/results/latest.json. Needs root (the lab), like the e2e tests.
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { testLab } from "../test/support/lab";
import { Chaos, CI_KILL_POINTS, formatTable, KILL_POINTS, type ScenarioResult } from "./harness";

async function main(): Promise<number> {
  const quick = process.argv.includes("--quick");
  const chaos = new Chaos({ lab: testLab(6), log: (l) => console.log(`${new Date().toISOString().slice(11, 19)}  ${l}`) });
  const rows: ScenarioResult[] = [];
  const outDir = resolve(__dirname, "..", "..", "chaos", "results");
  mkdirSync(outDir, { recursive: true });
  const save = () => writeFileSync(join(outDir, "latest.json"), JSON.stringify({ when: new Date().toISOString(), quick, rows }, null, 2) + "\n");
  try {
    await chaos.create();
    const points = quick ? KILL_POINTS.filter((p) => CI_KILL_POINTS.includes(p.id)) : KILL_POINTS;
    const steps: (() => Promise<ScenarioResult>)[] = [
      () => chaos.killChain(points),
      () => chaos.bootstrapFails("lab-broken", "etcd never starts"),
      () => chaos.bootstrapFails("lab-nossh", "SSH never comes up"),
      () => chaos.oldMemberDies(),
      () => chaos.backendUnwritable(),
      ...(quick ? [] : [() => chaos.lbRestart(), () => chaos.sshDrops()]),
    ];
    for (const step of steps) {
      rows.push(await step());
      save();
      console.log(formatTable(rows.slice(-1)));
    }
  } finally {
    await chaos.teardown();
  }
  console.log("\n" + formatTable(rows));
  for (const r of rows) {
    console.log(`\n${r.scenario}:`);
    for (const f of r.faults) console.log(`  fault: ${f}`);
    for (const n of r.notes) console.log(`  note: ${n}`);
    for (const i of r.invariants) console.log(`  ${i.ok ? "held  " : "BROKEN"} ${i.name}${i.detail ? `: ${i.detail}` : ""}`);
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
