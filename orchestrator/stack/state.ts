// The stack state as molt reads it: the node list in the stack's outputs (validated, never
// guessed), the exported deployment (resources, pending operations), and the clean-up of
// what a killed engine left pending.
import { GUARD_NAME } from "../../infra/guard";
import type { Deployment, LocalWorkspace, OutputMap, Stack } from "@pulumi/pulumi/automation";
import { z } from "zod";
import type { NodeEntry, StoredState } from "../core/nodes";
import { NODE_LIST_SCHEMA, type MoltOutputs } from "../../infra/program";
import { classifyEngineError } from "./driver";
import { explainPending, type PendingOperation } from "./pending";
import type { ClearedOperation } from "../core/edges";
import type { StateResource } from "./targets";
import { userBackendUrl } from "../backend/file-sidecars";
import { rememberSecret } from "../report/redact";

export class CorruptStateError extends Error {
  constructor(stack: string, detail: string) {
    super(
      `the node list stored in stack "${stack}" is not valid (${detail}); nothing was changed. ` +
        `Inspect it with \`molt status --stack ${stack}\` or \`pulumi stack export\`; molt will not guess a list ` +
        `and destroy nodes because of it.`,
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
    // A node molt did not create (`molt adopt`): what adoption checked and recorded.
    adopted: z
      .object({
        address: z.string().min(1),
        ssh: z.object({ host: z.string().min(1), port: z.number().int(), user: z.string().min(1) }).strict(),
        hostKey: z.string().min(1),
        bastion: z.string().optional(),
        etcdVersion: z.string(),
        source: z.enum(["kubeone", "hosts"]),
        providerId: z.string().optional(),
        machine: z
          .object({ importId: z.string().min(1) })
          .strict()
          .optional(),
        keepalived: z
          .object({ priority: z.number().int().min(1).max(255) })
          .strict()
          .optional(),
      })
      .strict()
      .optional(),
  })
  .strict();
const endpointSchema = z.object({
  name: z.string(),
  privateAddress: z.string(),
  sshHost: z.string(),
  sshPort: z.number(),
  hostPublicKey: z.string(),
  providerId: z.string(),
  sshUser: z.string().optional(),
});
const outputsSchema = z.object({
  schema: z.literal(NODE_LIST_SCHEMA),
  nodes: z.array(entrySchema),
  endpoints: z.array(endpointSchema),
  sshUser: z.string(),
  apiEndpoint: z.string(),
});

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
      userBackendUrl(
        (stack.workspace as { envVars?: Record<string, string> }).envVars?.PULUMI_BACKEND_URL ?? "the backend",
      ),
    );
  }
  return parseStoredState(stack, out);
}

const SECRET_SIG = "4dabf18193072939515e22adb298388d";
const SECRET = "1b47061264138c4ac30d75fd1eb44270";

/** A secret of an export made with --show-secrets, unwrapped (its value is JSON in `plaintext`). */
function unwrapSecret(v: unknown): { value: unknown; secret: boolean } {
  if (v && typeof v === "object" && (v as Record<string, unknown>)[SECRET_SIG] === SECRET) {
    const plaintext = (v as { plaintext?: unknown }).plaintext;
    if (typeof plaintext !== "string")
      throw new Error("an encrypted secret in the export (exported without --show-secrets)");
    return { value: JSON.parse(plaintext) as unknown, secret: true };
  }
  return { value: v, secret: false };
}

/**
 * The stored state from an export (`stack.exportStack()` runs `stack export --show-secrets`):
 * the root stack resource's outputs are the stack's outputs, so no `stack output` is needed.
 */
export async function storedStateOfExport(stack: Stack, state: StateView): Promise<StoredState> {
  const root = state.resources.find((r) => r.type === "pulumi:pulumi:Stack") as
    { outputs?: Record<string, unknown> } | undefined;
  const out: OutputMap = {};
  for (const [k, v] of Object.entries(root?.outputs ?? {})) out[k] = unwrapSecret(v);
  return parseStoredState(stack, out);
}

/** Validates stack outputs (from `stack.outputs()` or an `up` result) into the stored state. */
export async function parseStoredState(stack: Stack, out: OutputMap): Promise<StoredState> {
  if (!out.molt) {
    // A stack with resources but no molt output is not one molt created.
    const resources = (await stack.exportStack()).deployment?.resources ?? [];
    if (
      resources.some(
        (r: { type?: string; urn?: string }) =>
          r.type !== "pulumi:pulumi:Stack" &&
          r.type !== "pulumi:providers:pulumi-nodejs" &&
          // A first `up` cancelled after its state guard (infra/guard.ts) leaves only that.
          !r.urn?.endsWith(`::${GUARD_NAME}`),
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
  rememberSecret(out.sshPrivateKey?.value);
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

/**
 * The exported state: its resources, pending operations and the node list in its outputs
 * (undefined if it has none yet). By default with its secrets decrypted (the stack's
 * outputs hold the nodes' SSH key). `graphOnly` reads only what the next change needs (the
 * resource graph, the node list, the guard's token: none of them secret) without
 * `--show-secrets`: the engine decrypts nothing, which saves much of the export's time and
 * CPU. Its secrets stay ciphertext (`plain`), and a `signal` stops it.
 */
export async function exportState(stack: Stack, o: { graphOnly?: boolean; signal?: AbortSignal } = {}) {
  const graphOnly = o.graphOnly === true;
  return stateOfExport(graphOnly ? await exportGraph(stack, o.signal) : await stack.exportStack(), graphOnly);
}

/** Outputs whose secret value molt must never report (join material, keys), at any depth. */
const SECRET_OUTPUTS = new Set(["token", "certificateKey", "privateKey", "hostPrivateKey", "password", "passphrase"]);

/** The secrets an export with --show-secrets holds: from now on never reported (report/redact.ts). */
export function rememberStateSecrets(resources: { outputs?: Record<string, unknown> }[]): void {
  const walk = (v: unknown, key: string | undefined, inSecret: boolean): void => {
    if (typeof v === "string") {
      if (inSecret && key && SECRET_OUTPUTS.has(key)) rememberSecret(v);
    } else if (Array.isArray(v)) v.forEach((x) => walk(x, key, inSecret));
    else if (v && typeof v === "object") {
      const secret = unwrapSecretIfAny(v);
      if (secret !== undefined) return walk(secret, key, true);
      for (const [k, x] of Object.entries(v)) walk(x, k, inSecret);
    }
  };
  for (const r of resources) walk(r.outputs ?? {}, undefined, false);
}

function unwrapSecretIfAny(v: object): unknown {
  if ((v as Record<string, unknown>)[SECRET_SIG] !== SECRET) return undefined;
  const plaintext = (v as { plaintext?: unknown }).plaintext;
  if (typeof plaintext !== "string") return undefined;
  try {
    return JSON.parse(plaintext) as unknown;
  } catch {
    return plaintext;
  }
}

/** What exportState makes of an export (`graphOnly`: one taken without `--show-secrets`). */
export function stateOfExport(exported: Deployment, graphOnly = false) {
  const deployment = exported.deployment as {
    resources?: (StateResource & { outputs?: { molt?: { nodes?: unknown } } })[];
    pending_operations?: PendingOperation[];
  };
  const resources = deployment.resources ?? [];
  if (!graphOnly) rememberStateSecrets(resources);
  const nodes = resources.find((r) => r.type === "pulumi:pulumi:Stack")?.outputs?.molt?.nodes;
  return {
    exported,
    deployment,
    resources,
    listed: Array.isArray(nodes) ? (nodes as NodeEntry[]) : undefined,
    ...(graphOnly ? { plain: true as const } : {}),
  };
}

export type ExportedState = Awaited<ReturnType<typeof exportState>>;

/** What a run keeps of an export between changes: the resource graph, the list, the stack's outputs. */
export type StateView = Pick<ExportedState, "resources" | "listed" | "plain"> & {
  /** The state guard's token (infra/guard.ts), "" when the state holds no guard. */
  guardToken?: string;
};

/**
 * An export without what the run does not keep (every resource's inputs and outputs, the
 * secrets among them): only the root stack resource keeps its outputs (the stack's outputs).
 */
export function viewOf(state: ExportedState): StateView {
  const resources = state.resources.map((r) => {
    const { urn, type, id, parent, dependencies, propertyDependencies, deletedWith, outputs } = r;
    return {
      urn,
      type,
      ...(id ? { id } : {}),
      ...(parent ? { parent } : {}),
      ...(dependencies ? { dependencies } : {}),
      ...(propertyDependencies ? { propertyDependencies } : {}),
      ...(deletedWith ? { deletedWith } : {}),
      ...(type === "pulumi:pulumi:Stack" && outputs ? { outputs } : {}),
    };
  });
  const guard = state.resources.find((r) => r.urn.endsWith(`::${GUARD_NAME}`));
  const token = (guard?.outputs as { token?: unknown } | undefined)?.token;
  return {
    resources,
    listed: state.listed,
    guardToken: typeof token === "string" ? token : "",
    ...(state.plain ? { plain: true as const } : {}),
  };
}

/**
 * `stack export` without `--show-secrets`, through the command runner the Automation API's
 * exportStack uses, with a signal that stops it (a read: stopping it leaves nothing behind).
 */
async function exportGraph(stack: Stack, signal?: AbortSignal): Promise<Deployment> {
  const ws = stack.workspace as LocalWorkspace;
  // The command runner's `run` (stack/engine-process.ts), as the Automation API calls it.
  const engine = ws.pulumiCommand as unknown as {
    run(
      args: string[],
      cwd: string,
      env: Record<string, string>,
      onOutput?: (d: string) => void,
      onError?: (d: string) => void,
      signal?: AbortSignal,
    ): Promise<{ stdout: string }>;
  };
  const r = await engine.run(
    ["stack", "export", "--stack", stack.name],
    ws.workDir,
    { ...ws.envVars },
    undefined,
    undefined,
    signal,
  );
  return JSON.parse(r.stdout) as Deployment;
}

/** Resolves what a killed engine left pending (stack/pending.ts); returns what was cleared. */
export async function clearPendingOperations(stack: Stack, state: ExportedState): Promise<ClearedOperation[]> {
  const { exported, deployment, resources, listed } = state;
  const pending = deployment.pending_operations ?? [];
  if (pending.length === 0) return [];
  const operations = explainPending(
    pending,
    resources,
    (listed ?? []).map((n) => n.name),
  );
  await stack.importStack({ ...exported, deployment: { ...deployment, pending_operations: [] } });
  return operations;
}
