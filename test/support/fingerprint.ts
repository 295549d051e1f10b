// "Nothing was changed", made checkable: a fingerprint of everything a molt run could
// touch — the stack's stored resources and outputs (timestamps stripped), the stack files
// and molt locks in the backend, the lab's machines and bridge ports, and etcd's member
// list with IDs. Two equal fingerprints around a run prove it changed none of these.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { LabSettings } from "../../infra/lab/settings";
import type { NodeEndpoint } from "../../orchestrator/core/nodes";
import { FileStore } from "../../orchestrator/backend/file";
import { EtcdAccess } from "../../orchestrator/edges/etcd";
import { labLeftovers } from "./lab";
import { labEndpoints } from "./probe";

export interface Fingerprint {
  stacks: string[];
  locks: string[];
  /** Per stack: its resources (urn, type, id, inputs, outputs, dependencies), timestamps stripped. */
  resources: Record<string, unknown>;
  machines: unknown;
  netns: string[];
  ports: string[];
  members: string[];
}

function stripTimes(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(stripTimes);
  if (v && typeof v === "object") {
    return Object.fromEntries(
      Object.entries(v)
        .filter(([k]) => k !== "created" && k !== "modified")
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, x]) => [k, stripTimes(x)]),
    );
  }
  return v;
}

/** Where the file backend keeps the stack checkpoints of project molt. */
export function stackStateDir(stateDir: string): string {
  return join(stateDir, ".pulumi", "stacks", "molt");
}

export async function fingerprint(o: {
  stateDir: string;
  lab: LabSettings;
  endpoints: NodeEndpoint[];
  sshPrivateKey?: string;
  sshUser?: string;
}): Promise<Fingerprint> {
  const dir = stackStateDir(o.stateDir);
  const stacks = existsSync(dir)
    ? readdirSync(dir)
        .filter((f) => f.endsWith(".json"))
        .sort()
    : [];
  const resources: Record<string, unknown> = {};
  for (const f of stacks) {
    const doc = JSON.parse(readFileSync(join(dir, f), "utf8")) as {
      checkpoint?: { latest?: { resources?: unknown[] } };
    };
    resources[f] = stripTimes(doc.checkpoint?.latest?.resources ?? []);
  }
  // Live leases only (a released lease leaves a deletion marker behind, which is no lock).
  const locks = (await new FileStore(o.stateDir).list(".molt/locks")).sort();
  const left = labLeftovers(o.lab);
  const members =
    o.sshPrivateKey && o.endpoints.length ? await memberList(o.endpoints, o.sshUser ?? "root", o.sshPrivateKey) : [];
  return {
    stacks,
    locks,
    resources,
    machines: labEndpoints(o.lab).sort((a, b) => a.name.localeCompare(b.name)),
    netns: left.netns.sort(),
    ports: left.ports.map((l) => l.split(":")[1]?.trim().split("@")[0] ?? l).sort(),
    members,
  };
}

// One set of tunnels for every fingerprint (reopened when no node answers): the member
// list is read live (linearizable) each time, without SSH handshakes per call.
let shared: { key: string; access: EtcdAccess } | undefined;

async function memberList(endpoints: NodeEndpoint[], user: string, privateKey: string): Promise<string[]> {
  const id = JSON.stringify([endpoints.map((e) => e.name), user]);
  let lastError: unknown;
  for (let attempt = 0; attempt < 2; attempt++) {
    if (!shared || shared.key !== id) {
      await shared?.access.close();
      shared = { key: id, access: await EtcdAccess.open(endpoints, { user, privateKey }) };
    }
    for (const n of shared.access.nodes()) {
      try {
        return (await shared.access.memberList(n))
          .map((m) => `${m.id} ${m.name} ${m.peerURLs.join(",")} ${m.isLearner ? "learner" : "voter"}`)
          .sort();
      } catch (e) {
        lastError = e;
      }
    }
    await shared.access.close();
    shared = undefined;
  }
  throw lastError;
}

/** Closes the tunnels fingerprints keep open. */
export async function closeFingerprints(): Promise<void> {
  await shared?.access.close();
  shared = undefined;
}
