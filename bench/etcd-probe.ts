// An independent probe of molt's etcd gates, for the bench: every 100 ms, from inside a
// lab machine's network namespace (the host is refused etcd's ports), `etcdctl member list`
// with the machine's own healthcheck client certificate. It records when each member was
// first seen a started voter and when each was first seen gone, so the bench can put those
// instants next to molt's decisions (gate latency = condition true -> molt's next action).
import { execFile } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { netnsName } from "../infra/lab/host";
import type { LabSettings } from "../infra/lab/settings";

export interface EtcdSeen {
  /** First seen a started voting member. */
  voter?: number;
  /** First seen absent after having been seen. */
  gone?: number;
}

const TICK_MS = 100;

/** Any etcdctl of the lab's images (each machine's own is in its image), found once. */
function etcdctlOf(labRoot: string): string | undefined {
  const images = join(labRoot, "images");
  const found = (existsSync(images) ? readdirSync(images) : [])
    .map((i) => join(images, i, "bin", "etcdctl"))
    .find((f) => existsSync(f));
  return found;
}

/** `etcdctl member list` from inside `machine` with its healthcheck client certificate; undefined: no answer. */
function memberList(
  lab: Pick<LabSettings, "lab" | "labRoot">,
  machine: string,
  etcdctl: string,
): Promise<{ name: string; isLearner?: boolean }[] | undefined> {
  const root = join(lab.labRoot, "labs", lab.lab, "machines", machine, "root", "etc", "kubernetes", "pki", "etcd");
  return new Promise((res) =>
    execFile(
      "ip",
      [
        "netns",
        "exec",
        netnsName(lab.lab, machine),
        etcdctl,
        "--endpoints=https://127.0.0.1:2379",
        `--cacert=${root}/ca.crt`,
        `--cert=${root}/healthcheck-client.crt`,
        `--key=${root}/healthcheck-client.key`,
        "--dial-timeout=1s",
        "--command-timeout=1s",
        "member",
        "list",
        "-w",
        "json",
      ],
      { timeout: 3000 },
      (err, out) => {
        if (err) return res(undefined);
        try {
          res((JSON.parse(String(out)) as { members?: { name: string; isLearner?: boolean }[] }).members ?? []);
        } catch {
          res(undefined);
        }
      },
    ),
  );
}

/**
 * A member list of the lab's etcd: asked through the machine that answered last, or through
 * another when that one does not (it went away); undefined when none answered.
 */
export function labMemberList(
  lab: Pick<LabSettings, "lab" | "labRoot">,
): () => Promise<{ name: string; isLearner?: boolean }[] | undefined> {
  const machinesDir = join(lab.labRoot, "labs", lab.lab, "machines");
  let via: string | undefined;
  let etcdctl: string | undefined;
  return async () => {
    etcdctl ??= etcdctlOf(lab.labRoot);
    if (!etcdctl) return undefined;
    const machines = existsSync(machinesDir) ? readdirSync(machinesDir) : [];
    for (const m of via && machines.includes(via) ? [via, ...machines.filter((x) => x !== via)] : machines) {
      const members = await memberList(lab, m, etcdctl);
      if (!members) continue;
      via = m;
      return members;
    }
    return undefined;
  };
}

/** Starts probing the lab's etcd; `stop()` ends it and returns what it saw per member name. */
export function startEtcdProbe(lab: LabSettings): { stop(): Promise<Record<string, EtcdSeen>> } {
  const seen: Record<string, EtcdSeen> = {};
  let running = true;
  const members = labMemberList(lab);
  const loop = (async () => {
    while (running) {
      const started = Date.now();
      const list = await members();
      if (list) {
        const now = Date.now();
        const names = new Set(list.map((x) => x.name).filter(Boolean));
        for (const x of list) if (x.name && !x.isLearner) (seen[x.name] ??= {}).voter ??= now;
        for (const [name, s] of Object.entries(seen)) if (s.voter && !names.has(name)) s.gone ??= now;
      }
      const rest = TICK_MS - (Date.now() - started);
      if (rest > 0) await new Promise((r) => setTimeout(r, rest));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return seen;
    },
  };
}
