// The Automation API edge: opens a stack of molt's project with an inline program, on the
// backend and engine chosen in engine.ts. Everything that runs `pulumi` goes through here.
import { LocalWorkspace, type Deployment, type PulumiFn, type Stack } from "@pulumi/pulumi/automation";
import { join } from "node:path";
import { boundEngine } from "./engine-bind";
import { engineEnv, locateEngine, repoRoot } from "./engine";
import { cancellableEngine, engineTag } from "./engine-process";
import { keepingUserText } from "./stack-file";
import { fileBackendDir, removeBrokenSidecars, userBackendUrl } from "../backend/file-sidecars";

export interface OpenStackOptions {
  stackName: string;
  program: PulumiFn;
  /** Directory with Pulumi.yaml (and stacks/); molt's repository root by default. */
  workDir?: string;
  /** Create the stack in the backend if it does not exist (a rollout does; status does not). */
  create?: boolean;
  /** Extra environment for engine processes (tests point PULUMI_BACKEND_URL elsewhere). */
  env?: Record<string, string>;
  /**
   * The run's cancel: an engine command in flight gets the engine's graceful cancel (one
   * SIGINT) and fails with EngineCancelledError; no `up` starts once it has fired.
   */
  signal?: AbortSignal;
  /** Tag the engine's processes as this stack's run, so a later run finds any left over. */
  tagProcesses?: boolean;
  /** Start engines that die with this process (stack/engine-bind.ts); unbound where impossible. */
  bindEngine?: boolean;
  /** Told of broken metadata sidecars removed from a file backend (default: a line on stderr). */
  onRepair?: (removed: string[]) => void;
}

/** A sentence for the sidecars a killed engine left broken and molt removed (backend/file-sidecars.ts). */
export function repairMessage(removed: string[]): string {
  return (
    `removed ${removed.length} broken metadata sidecar(s) of the file backend (cut short by an engine killed while ` +
    `writing them; they make reads fail with "failed to load checkpoint: EOF"): ${removed.join(", ")}`
  );
}

function reportRepair(removed: string[]): void {
  process.stderr.write(`molt: ${repairMessage(removed)}\n`);
}

export class StackNotFoundError extends Error {
  constructor(
    readonly stackName: string,
    backend: string,
  ) {
    super(
      `stack "${stackName}" does not exist in ${backend}; nothing was changed. Run \`molt rollout --stack ` +
        `${stackName}\` to create it, or check --stack and PULUMI_BACKEND_URL.`,
    );
    this.name = "StackNotFoundError";
  }
}

/** The backend (PULUMI_BACKEND_URL) cannot be opened: a bad URL, a missing folder, no login. */
export class BackendError extends Error {
  constructor(
    readonly backend: string,
    /** What is wrong, without the advice (a lease's renewal reports it mid-run). */
    readonly detail: string,
  ) {
    super(
      `cannot open the Pulumi backend ${backend}: ${detail}; nothing was changed. ` +
        `Set PULUMI_BACKEND_URL to a backend you can use (file://<existing folder>, s3://..., azblob://..., or ` +
        `https://api.pulumi.com with PULUMI_ACCESS_TOKEN), or unset it for ~/.molt/state.`,
    );
    this.name = "BackendError";
  }
}

/** The passphrase does not decrypt the stack's secrets. */
export class PassphraseError extends Error {
  constructor(
    readonly stackName: string,
    /** No passphrase was given at all (a shared backend never gets molt's local default). */
    readonly missing = false,
  ) {
    super(
      missing
        ? `no passphrase was given for the secrets of stack "${stackName}"; nothing was changed. On a shared backend ` +
            `every runner needs the same passphrase: set PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE ` +
            `(or create the stack with a KMS secrets provider: pulumi stack init --secrets-provider awskms://...).`
        : `the passphrase does not decrypt the secrets of stack "${stackName}" (incorrect passphrase); nothing was ` +
            `changed. ` +
            `Set PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE to the passphrase the stack was created ` +
            `with (molt's default is ~/.molt/passphrase).`,
    );
    this.name = "PassphraseError";
  }
}

/**
 * The engine's own error line. The Automation API wraps it as "code: N\n stdout: ...\n stderr:
 * error: ...", so the line may start after " stderr: " rather than at the start of a line.
 */
export function engineErrorLine(message: string): string {
  return /^(?: *stderr: )?error: (.+)$/m.exec(message)?.[1].trim() ?? message.split("\n")[0];
}

/**
 * Maps the engine's refusals that are bad input (backend, passphrase) to typed errors;
 * anything else is returned as it is.
 */
export function classifyEngineError(e: unknown, stackName: string, backend: string): unknown {
  if (!(e instanceof Error) || e instanceof BackendError || e instanceof PassphraseError) return e;
  if (/passphrase must be set/i.test(e.message)) return new PassphraseError(stackName, true);
  if (/incorrect passphrase|failed to decrypt/i.test(e.message)) return new PassphraseError(stackName);
  if (BACKEND_UNUSABLE.test(e.message)) {
    return new BackendError(backend, engineErrorLine(e.message));
  }
  return e;
}

export async function openStack(o: OpenStackOptions): Promise<Stack> {
  return (await openStackReading(o, false)).stack;
}

export interface OpenedStack {
  stack: Stack;
  /**
   * With `readAhead`: `stack export --show-secrets`, run by the stack's name while the engine
   * selects it (every engine command names its stack; the selection only proves it exists), so
   * the two engine starts overlap. Rejects when the stack did not exist yet. Taken before
   * anything the caller does after opening: the caller decides whether it still holds
   * (stack/edge.ts prepare).
   */
  firstExport?: Promise<Deployment>;
}

/** openStack, and with `readAhead` the state exported while the stack is selected. */
export async function openStackReading(o: OpenStackOptions, readAhead: boolean): Promise<OpenedStack> {
  const located = locateEngine();
  const engine = (o.bindEngine && boundEngine(located)) || located;
  const envVars = engineEnv(engine, o.env ?? {});
  const backend = userBackendUrl(envVars.PULUMI_BACKEND_URL);
  const dir = fileBackendDir(backend);
  if (dir) {
    const removed = removeBrokenSidecars(dir);
    if (removed.length) (o.onRepair ?? reportRepair)(removed);
  }
  const pulumiCommand = cancellableEngine({
    binDir: engine.binDir,
    version: engine.version,
    ...(o.signal ? { signal: o.signal } : {}),
    ...(o.tagProcesses ? { tag: engineTag(backend, o.stackName) } : {}),
  });
  const args = { stackName: o.stackName, projectName: "molt", program: o.program };
  const wsOpts = { workDir: o.workDir ?? repoRoot, pulumiCommand, envVars };
  // A workspace of its own (same engine, folder and environment) for the read-ahead.
  const firstExport = readAhead ? LocalWorkspace.create(wsOpts).then((ws) => ws.exportStack(o.stackName)) : undefined;
  firstExport?.catch(() => undefined);
  const selected = async (): Promise<Stack> => {
    if (o.create === false) {
      try {
        return await LocalWorkspace.selectStack(args, wsOpts);
      } catch (e) {
        if (e instanceof Error && /no stack named|not found/i.test(e.message))
          throw new StackNotFoundError(o.stackName, backend);
        throw classifyEngineError(e, o.stackName, backend);
      }
    }
    try {
      // Creating the stack makes Pulumi rewrite stacks/Pulumi.<stack>.yaml: keep the user's text.
      const file = join(wsOpts.workDir, "stacks", `Pulumi.${o.stackName}.yaml`);
      return await keepingUserText(file, async () => {
        try {
          return await LocalWorkspace.createOrSelectStack(args, wsOpts);
        } catch (e) {
          // Another runner created it between the engine's select and its create: select it.
          if (e instanceof Error && /stack '.*' already exists/i.test(e.message))
            return await LocalWorkspace.selectStack(args, wsOpts);
          throw e;
        }
      });
    } catch (e) {
      throw classifyEngineError(e, o.stackName, backend);
    }
  };
  try {
    return { stack: await selected(), ...(firstExport ? { firstExport } : {}) };
  } catch (e) {
    // No engine command of a failed open outlives it.
    await firstExport?.catch(() => undefined);
    throw e;
  }
}

export { EngineCancelledError, stopEnginesNow } from "./engine-process";

/** What the engine says when the backend itself cannot be used (not a stack or state problem). */
const BACKEND_UNUSABLE = new RegExp(
  [
    "PULUMI_ACCESS_TOKEN must be set",
    "unable to open state directory",
    "unable to open bucket",
    "unknown backend",
    "unsupported (backend|scheme)",
    "problem logging in",
    "failed to log ?in",
    "getting user info",
    "could not (log|sign) ?in",
  ].join("|"),
  "i",
);
