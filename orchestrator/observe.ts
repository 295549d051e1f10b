// Observation: everything the planner needs, read once per pass into a Snapshot.
import type { OutputMap, Stack } from "@pulumi/pulumi/automation";
import { z } from "zod";
import { NODE_LIST_SCHEMA, type MoltOutputs } from "../infra/program";
import { EtcdAccess, type Member } from "./edges/etcd";
import { KubeAccess, type ComponentHealth, type KubeObservation } from "./edges/kube";
import type { SshSession } from "../infra/remote/ssh";
import { classifyEngineError } from "./stack/driver";
import type { NodeView } from "./events";
import { agreedLeader, isHealthyVoter, isOutdated, kubeProblem, memberOfNode } from "./plan";
import type { EtcdObservation, Intent, NodeEndpoint, NodeEntry, Snapshot, StatusResult } from "./model";

export class CorruptStateError extends Error {
  constructor(stack: string, detail: string) {
    super(
      `the node list stored in stack "${stack}" is not valid (${detail}); nothing was changed. ` +
        `Inspect it with \`molt status --stack ${stack}\` or \`pulumi stack export\`; molt will not guess a list and destroy nodes because of it.`,
    );
    this.name = "CorruptStateError";
  }
}

const entrySchema = z
  .object({
    name: z.string().min(1),
    image: z.string().min(1),
    kubernetesVersion: z.string().optional(),
    failureDomain: z.string().optional(),
    role: z.literal("control-plane"),
    generation: z.number().int().positive(),
    init: z.boolean(),
  })
  .strict();
const endpointSchema = z.object({
  name: z.string(),
  privateAddress: z.string(),
  sshHost: z.string(),
  sshPort: z.number(),
  hostPublicKey: z.string(),
  providerId: z.string(),
});
const outputsSchema = z.object({
  schema: z.literal(NODE_LIST_SCHEMA),
  nodes: z.array(entrySchema),
  endpoints: z.array(endpointSchema),
  sshUser: z.string(),
  apiEndpoint: z.string(),
});

export interface StoredState {
  nodes: NodeEntry[];
  endpoints: NodeEndpoint[];
  sshUser: string;
  sshPrivateKey?: string;
  apiEndpoint?: string;
}

/** The node list as the stack state holds it (empty for a new stack). */
export async function readStoredState(stack: Stack): Promise<StoredState> {
  let out: OutputMap;
  try {
    out = await stack.outputs();
  } catch (e) {
    // A wrong passphrase shows first here (the outputs hold the stack's secrets).
    throw classifyEngineError(
      e,
      stack.name,
      (stack.workspace as { envVars?: Record<string, string> }).envVars?.PULUMI_BACKEND_URL ?? "the backend",
    );
  }
  return parseStoredState(stack, out);
}

/** Validates stack outputs (from `stack.outputs()` or an `up` result) into the stored state. */
export async function parseStoredState(stack: Stack, out: OutputMap): Promise<StoredState> {
  if (!out.molt) {
    // A stack with resources but no molt output is not one molt created.
    const resources = (await stack.exportStack()).deployment?.resources ?? [];
    if (
      resources.some(
        (r: { type?: string }) => r.type !== "pulumi:pulumi:Stack" && r.type !== "pulumi:providers:pulumi-nodejs",
      )
    ) {
      throw new CorruptStateError(stack.name, "the stack has resources but no `molt` output");
    }
    return { nodes: [], endpoints: [], sshUser: "root" };
  }
  const parsed = outputsSchema.safeParse(out.molt.value);
  if (!parsed.success)
    throw new CorruptStateError(
      stack.name,
      parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; "),
    );
  const m: MoltOutputs = parsed.data;
  const names = new Set(m.nodes.map((n) => n.name));
  if (names.size !== m.nodes.length) throw new CorruptStateError(stack.name, "duplicate node names");
  if (m.endpoints.length !== m.nodes.length || m.endpoints.some((e) => !names.has(e.name)))
    throw new CorruptStateError(stack.name, "endpoints do not match nodes");
  return {
    nodes: m.nodes,
    endpoints: m.endpoints,
    sshUser: m.sshUser,
    sshPrivateKey: out.sshPrivateKey?.value as string | undefined,
    apiEndpoint: m.apiEndpoint,
  };
}

/** Opens (or reuses) tunnels to exactly the given nodes. */
export async function ensureAccess(
  current: EtcdAccess | undefined,
  state: StoredState,
): Promise<EtcdAccess | undefined> {
  const want = state.endpoints
    .map((e) => e.name)
    .sort()
    .join(",");
  if (current && current.nodes().sort().join(",") === want && current.unreachable.size === 0) return current;
  await current?.close();
  if (state.endpoints.length === 0 || !state.sshPrivateKey) return undefined;
  return EtcdAccess.open(state.endpoints, { user: state.sshUser, privateKey: state.sshPrivateKey });
}

export async function observeEtcd(access: EtcdAccess, nodes: NodeEntry[]): Promise<EtcdObservation> {
  const status: Record<string, StatusResult> = {};
  await Promise.all(
    nodes.map(async (n) => {
      if (access.unreachable.has(n.name)) {
        status[n.name] = { ok: false, error: `unreachable over SSH: ${access.unreachable.get(n.name)}` };
        return;
      }
      try {
        status[n.name] = { ok: true, status: await access.status(n.name) };
      } catch (e) {
        status[n.name] = { ok: false, error: (e as Error).message.split("\n")[0] };
      }
    }),
  );
  // Members and alarms from a voter that answered (learners reject these calls).
  const voters = nodes.filter((n) => {
    const s = status[n.name];
    return s?.ok && !s.status.isLearner;
  });
  let lastError: unknown;
  for (const v of voters) {
    try {
      const members: Member[] = await access.memberList(v.name);
      const alarms = await access.alarms(v.name);
      return { members, status, alarms };
    } catch (e) {
      lastError = e;
    }
  }
  throw new Error(
    `no voting member answered member list: ${lastError ? (lastError as Error).message : "no reachable voter"}`,
  );
}

/** Opens the Kubernetes edge over the etcd edge's SSH sessions. */
export async function openKube(access: EtcdAccess): Promise<KubeAccess> {
  const sessions = new Map<string, SshSession>();
  for (const n of access.nodes()) {
    const ssh = access.session(n);
    if (ssh) sessions.set(n, ssh);
  }
  return KubeAccess.open(sessions);
}

/** Every node's components through its own tunnels; the cluster through the newest ready API server. */
export async function observeKube(kube: KubeAccess, nodes: NodeEntry[]): Promise<KubeObservation> {
  const components: Record<string, ComponentHealth> = {};
  await Promise.all(nodes.map(async (n) => void (components[n.name] = await kube.components(n.name))));
  const via = [...nodes]
    .sort((a, b) => b.generation - a.generation)
    .find((n) => components[n.name]?.apiserver.ok)?.name;
  if (!via)
    throw new Error(
      `no kube-apiserver is ready (${nodes.map((n) => `${n.name}: ${components[n.name]?.apiserver.error}`).join("; ")})`,
    );
  return { via, components, ...(await kube.observeCluster(via)) };
}

export function nodeViews(s: Snapshot): NodeView[] {
  const leader = s.etcd ? agreedLeader(s) : undefined;
  return s.nodes.map((n) => {
    const addr = s.endpoints.find((e) => e.name === n.name)?.privateAddress;
    const m = s.etcd ? memberOfNode(s.etcd.members, n, addr) : undefined;
    const st = s.etcd?.status[n.name];
    return {
      name: n.name,
      image: n.image,
      ...(n.kubernetesVersion ? { kubernetesVersion: n.kubernetesVersion } : {}),
      generation: n.generation,
      outdated: isOutdated(n, s.intent),
      ...(s.kube
        ? {
            kube: {
              nodeReady: s.kube.nodes.find((k) => k.name === n.name)?.ready ?? false,
              cordoned: s.kube.nodes.find((k) => k.name === n.name)?.unschedulable ?? false,
              ...(s.kube.components[n.name]?.apiserver.version
                ? { apiserverVersion: s.kube.components[n.name].apiserver.version }
                : {}),
              healthy: kubeProblem(s, n.name) === undefined,
            },
          }
        : {}),
      ...(m
        ? {
            member: {
              id: m.id,
              learner: m.isLearner,
              leader: m.id === leader,
              healthy: isHealthyVoter(s, n.name, leader),
              ...(st?.ok ? { appliedIndex: st.status.raftAppliedIndex.toString() } : {}),
            },
          }
        : {}),
    };
  });
}

export type { Intent };
