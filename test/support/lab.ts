// Helpers for tests that run on the lab: an isolated lab (own bridge, subnet and name)
// and leak checks.
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import type { LabSettings } from "../../infra/lab/node";

export const LAB_ROOT = process.env.MOLT_LAB_ROOT ?? "/var/lib/molt-lab";

/** A lab of its own per test suite, so suites never see each other's machines. */
export function testLab(id: number): LabSettings {
  return { lab: `t${id}`, labRoot: LAB_ROOT, bridge: `moltbr-t${id}`, subnet: `10.77.${100 + id}.0/24`, lbPort: 6443 };
}

/** Everything a lab leaves on the host; all empty when nothing leaked. */
export function labLeftovers(lab: LabSettings): {
  netns: string[];
  ports: string[];
  machineDirs: string[];
  haproxy: string[];
} {
  const netns = execFileSync("ip", ["netns", "list"], { encoding: "utf8" })
    .split("\n")
    .map((l) => l.split(" ")[0])
    .filter((n) => n.startsWith(`molt-${lab.lab}-`));
  let ports: string[] = [];
  try {
    ports = execFileSync("ip", ["-o", "link", "show", "master", lab.bridge], { encoding: "utf8" })
      .split("\n")
      .filter(Boolean);
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

export interface LabStackOptions {
  image: string;
  replicas?: number;
  maxSurge?: 0 | 1;
  joinSeconds?: number;
  settleSeconds?: number;
  drainSeconds?: number;
}

/** stacks/Pulumi.<stack>.yaml of a lab stack (what a user writes; unset values keep molt's defaults). */
export function labStackYaml(lab: LabSettings, o: LabStackOptions): string {
  const timeouts = Object.fromEntries(
    Object.entries({ joinSeconds: o.joinSeconds, settleSeconds: o.settleSeconds, drainSeconds: o.drainSeconds }).filter(
      ([, v]) => v !== undefined,
    ),
  );
  return stringify({
    config: {
      "molt:provider": "lab",
      "molt:replicas": o.replicas ?? 3,
      "molt:image": o.image,
      ...(o.maxSurge !== undefined ? { "molt:rollout": { maxSurge: o.maxSurge } } : {}),
      ...(Object.keys(timeouts).length ? { "molt:timeouts": timeouts } : {}),
      "molt:lab": { name: lab.lab, bridge: lab.bridge, subnet: lab.subnet },
    },
  });
}
