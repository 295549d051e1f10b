// Helpers for tests that run on the lab: an isolated lab (own bridge, subnet and name),
// leak checks, and a quorum probe.
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import type { LabSettings } from "../../infra/lab/node";
import type { EtcdAccess } from "../../orchestrator/edges/etcd";

export const LAB_ROOT = process.env.MOLT_LAB_ROOT ?? "/var/lib/molt-lab";

/** A lab of its own per test suite, so suites never see each other's machines. */
export function testLab(id: number): LabSettings {
  return { lab: `t${id}`, labRoot: LAB_ROOT, bridge: `moltbr-t${id}`, subnet: `10.77.${100 + id}.0/24`, lbPort: 6443 };
}

/** Everything a lab leaves on the host; all empty when nothing leaked. */
export function labLeftovers(lab: LabSettings): { netns: string[]; ports: string[]; machineDirs: string[]; haproxy: string[] } {
  const netns = execFileSync("ip", ["netns", "list"], { encoding: "utf8" })
    .split("\n")
    .map((l) => l.split(" ")[0])
    .filter((n) => n.startsWith(`molt-${lab.lab}-`));
  let ports: string[] = [];
  try {
    ports = execFileSync("ip", ["-o", "link", "show", "master", lab.bridge], { encoding: "utf8" }).split("\n").filter(Boolean);
  } catch {
    ports = [];
  }
  const mdir = join(lab.labRoot, "labs", lab.lab, "machines");
  const machineDirs = existsSync(mdir) ? readdirSync(mdir) : [];
  const haproxy = execFileSync("ps", ["-eo", "pid,args"], { encoding: "utf8" })
    .split("\n")
    .filter((l) => l.includes("haproxy") && l.includes(`/labs/${lab.lab}/lb/`));
  return { netns, ports, machineDirs, haproxy };
}

export interface ProbeReport {
  ok: number;
  failed: number;
  errors: string[];
  acknowledged: Map<string, string>;
  longestGapMs: number;
}

/**
 * Writes and reads back a key at a steady rate through the voters' tunnels, recording
 * every result; stop() returns the report. Used to show that quorum held.
 */
export function startProbe(etcd: () => EtcdAccess, voters: () => string[], intervalMs = 50): { stop: () => Promise<ProbeReport> } {
  const report: ProbeReport = { ok: 0, failed: 0, errors: [], acknowledged: new Map(), longestGapMs: 0 };
  let running = true;
  let lastOk = Date.now();
  let i = 0;
  const loop = (async () => {
    while (running) {
      const key = `molt-probe/${i++}`;
      const value = String(Date.now());
      let client: ReturnType<EtcdAccess["voters"]> | undefined;
      try {
        client = etcd().voters(voters());
        await client.put(key).value(value);
        report.acknowledged.set(key, value);
        const got = await client.get(key).string();
        if (got !== value) throw new Error(`read ${got} after writing ${value}`);
        report.ok++;
        const now = Date.now();
        report.longestGapMs = Math.max(report.longestGapMs, now - lastOk);
        lastOk = now;
      } catch (e) {
        report.failed++;
        if (report.errors.length < 10) report.errors.push((e as Error).message);
      } finally {
        client?.close();
      }
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return report;
    },
  };
}
