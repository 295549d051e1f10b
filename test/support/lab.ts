// Helpers for tests that run on the lab: an isolated lab (own bridge, subnet and name)
// and leak checks.
import { execFileSync } from "node:child_process";
import { netnsName } from "../../infra/lab/host";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import type { LabSettings } from "../../infra/lab/settings";

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
  /** molt:rollout.pruneWithNextSurge. */
  pruneWithNextSurge?: boolean;
  joinSeconds?: number;
  settleSeconds?: number;
  drainSeconds?: number;
  /** The stack lease's time to live (molt:timeouts.lockSeconds). */
  lockSeconds?: number;
  /** molt:apiEndpoint (e.g. { mode: "vip" }). */
  apiEndpoint?: Record<string, unknown>;
  /** molt:lock.in. */
  lockIn?: "backend" | "cluster";
  /** molt:encryptionAtRest. */
  encryptionAtRest?: boolean;
}

/** stacks/Pulumi.<stack>.yaml of a lab stack (what a user writes; unset values keep molt's defaults). */
export function labStackYaml(lab: LabSettings, o: LabStackOptions): string {
  const timeouts = Object.fromEntries(
    Object.entries({
      joinSeconds: o.joinSeconds,
      settleSeconds: o.settleSeconds,
      drainSeconds: o.drainSeconds,
      lockSeconds: o.lockSeconds,
    }).filter(([, v]) => v !== undefined),
  );
  return stringify({
    config: {
      "molt:provider": "lab",
      "molt:replicas": o.replicas ?? 3,
      "molt:image": o.image,
      ...(o.maxSurge !== undefined || o.pruneWithNextSurge !== undefined
        ? {
            "molt:rollout": {
              ...(o.maxSurge !== undefined ? { maxSurge: o.maxSurge } : {}),
              ...(o.pruneWithNextSurge !== undefined ? { pruneWithNextSurge: o.pruneWithNextSurge } : {}),
            },
          }
        : {}),
      ...(Object.keys(timeouts).length ? { "molt:timeouts": timeouts } : {}),
      "molt:lab": { name: lab.lab, bridge: lab.bridge, subnet: lab.subnet },
      ...(o.apiEndpoint ? { "molt:apiEndpoint": o.apiEndpoint } : {}),
      ...(o.lockIn ? { "molt:lock": { in: o.lockIn } } : {}),
      ...(o.encryptionAtRest ? { "molt:encryptionAtRest": true } : {}),
    },
  });
}

/**
 * Kills a lab machine outright, like a powered-off VM: every process of its namespaces, until
 * none is left (a dying parent may fork once more: keepalived restarts its VRRP child, and a
 * child left alone would exit gracefully). The namespace and its address stay, as a dead
 * VM's port on the switch would. Returns how many processes were killed.
 */
export function killLabMachine(lab: LabSettings, name: string): number {
  const ns = netnsName(lab.lab, name);
  let killed = 0;
  const until = Date.now() + 10_000;
  for (;;) {
    const pids = execFileSync("ip", ["netns", "pids", ns], { encoding: "utf8" }).split(/\s+/).filter(Boolean);
    if (pids.length === 0) return killed;
    if (Date.now() > until) throw new Error(`machine ${name} still has processes after 10 s: ${pids.join(" ")}`);
    for (const pid of pids) {
      try {
        process.kill(Number(pid), "SIGKILL");
        killed++;
      } catch {
        /* already gone */
      }
    }
  }
}
