// How molt runs the Pulumi CLI: the Automation API's command runner, replaced so that a
// cancel reaches the engine the engine's own way, exactly once.
//
// The Automation API spawns the CLI in molt's process group. A Ctrl-C in a terminal then
// reaches both, and the API forwards the abort as a second SIGINT: to the CLI, two SIGINTs
// mean "terminate now" (orphaned resources, pending operations, plugins left running). Its
// runner (execa) also loads signal-exit, which re-raises a signal on molt itself. Here the
// CLI runs in a session of its own, and molt alone decides what it receives:
//   - the run's AbortSignal fires: one SIGINT, the engine's graceful cancel (steps already
//     running finish, no new step starts), then the command fails with EngineCancelledError;
//   - stopEnginesNow() (a second signal to molt): a second SIGINT, the engine terminates;
//     if it has not exited within a deadline, its process group is killed.
// Every engine process carries MOLT_ENGINE_OF in its environment (and passes it on to its
// plugins), so a later run can find what a killed run left (stack/leftovers.ts).
import { spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { delimiter, dirname, isAbsolute, join } from "node:path";
import { SemVer } from "semver";
import { PulumiCommand } from "@pulumi/pulumi/automation";
import { pollUntil } from "../../lib/poll";
import { alive } from "../../lib/process";
import { EngineCancelledError } from "./cancelled";
import { userBackendUrl } from "../backend/file-sidecars";

export { EngineCancelledError };

// The Automation API's own result and error types, so its callers (ConcurrentUpdateError,
// StackNotFoundError detection) see what they expect.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { CommandResult } = require("@pulumi/pulumi/automation/cmd") as {
  CommandResult: new (stdout: string, stderr: string, code: number, err?: Error) => unknown;
};
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { createCommandError } = require("@pulumi/pulumi/automation/errors") as {
  createCommandError: (result: unknown) => Error;
};

/** The environment variable that names the stack an engine process works for. */
export const ENGINE_TAG_VAR = "MOLT_ENGINE_OF";
/** The pid of the molt process that started a tagged engine (its plugins inherit it): alive, they are not leftovers. */
export const ENGINE_OWNER_VAR = "MOLT_ENGINE_OWNER";

/** The tag of a stack's engine processes: the stack and a digest of its backend. */
export function engineTag(backend: string, stack: string): string {
  // The backend as the user named it: the engine's own URL may carry molt's metadata=skip.
  return `${stack}@${createHash("sha256").update(userBackendUrl(backend)).digest("hex").slice(0, 16)}`;
}

/** Commands that change the stack: never started once the run was cancelled. */
const MUTATING = new Set(["up", "destroy", "refresh", "import", "cancel"]);
const TERMINATE_GRACE_MS = 15_000;

interface Running {
  child: ChildProcess;
  command: string;
  hard: boolean;
  cancelled: boolean;
}
const running = new Set<Running>();

/** One finished engine command: its verb and subcommand, and how long the process ran. */
export interface EngineCommandTiming {
  command: string;
  ms: number;
  ok: boolean;
}
const commandObservers = new Set<(c: EngineCommandTiming) => void>();

/** Observes every engine command this process runs (the bench counts and times them); returns the unsubscribe. */
export function observeEngineCommands(f: (c: EngineCommandTiming) => void): () => void {
  commandObservers.add(f);
  return () => commandObservers.delete(f);
}

/**
 * The second signal: terminates every engine command of this process (a second SIGINT,
 * the engine's "terminate now"; its process group is killed if it is still there after
 * a grace period). Returns what was running, for the caller to report.
 */
export function stopEnginesNow(): { pid: number; command: string }[] {
  const stopped: { pid: number; command: string }[] = [];
  for (const r of running) {
    const pid = r.child.pid;
    if (pid === undefined || r.child.exitCode !== null) continue;
    r.cancelled = true;
    r.hard = true;
    signalGroup(pid, "SIGINT");
    stopped.push({ pid, command: r.command });
    void pollUntil(() => (alive(pid) ? undefined : true), {
      what: `the engine (pid ${pid}) to terminate`,
      deadlineMs: TERMINATE_GRACE_MS,
      maxIntervalMs: 250,
    }).catch(() => signalGroup(pid, "SIGKILL"));
  }
  return stopped;
}

function signalGroup(pid: number, sig: NodeJS.Signals): void {
  try {
    // The CLI leads its own process group; SIGINT goes to the CLI alone (its plugins
    // run in groups of their own and are shut down by the engine).
    process.kill(sig === "SIGKILL" ? -pid : pid, sig);
  } catch {
    /* already gone */
  }
}

function lastError(stderr: string): string {
  return /^error: (.+)$/m.exec(stderr)?.[1].trim() ?? "";
}

/**
 * A PulumiCommand for the located engine whose commands are cancelled through
 * `signal` (the Automation API's own per-call signal is honoured too) and tagged with `tag`.
 */
export function cancellableEngine(o: {
  /** The engine's bin directory (locateEngine). */
  binDir: string;
  /** Its version, as locateEngine read and checked it (no second `pulumi version`). */
  version: string;
  signal?: AbortSignal;
  tag?: string;
}): PulumiCommand {
  const command = join(o.binDir, "pulumi");
  const engine = Object.create(PulumiCommand.prototype, {
    command: { value: command, enumerable: true },
    version: { value: new SemVer(o.version), enumerable: true },
  }) as PulumiCommand & { run: typeof run };
  async function run(
    args: string[],
    cwd: string,
    additionalEnv: Record<string, string>,
    onOutput?: (data: string) => void,
    onError?: (data: string) => void,
    callSignal?: AbortSignal,
  ): Promise<unknown> {
    if (!args.includes("--non-interactive")) args.push("--non-interactive");
    const verb = args[0];
    const what = args.filter((a) => !a.startsWith("--client=")).join(" ");
    const signals = [o.signal, callSignal].filter((s): s is AbortSignal => s !== undefined);
    if (MUTATING.has(verb) && signals.some((s) => s.aborted)) throw new EngineCancelledError(verb, false, false, "");
    const env: Record<string, string> = {
      ...(process.env as Record<string, string>),
      ...additionalEnv,
      PULUMI_AUTOMATION_API: "true",
      ...(o.tag ? { [ENGINE_TAG_VAR]: o.tag, [ENGINE_OWNER_VAR]: String(process.pid) } : {}),
    };
    // As the Automation API does: the CLI's own directory first, for its bundled plugins.
    if (isAbsolute(command))
      env.PATH = `${dirname(command)}${delimiter}${additionalEnv.PATH ?? process.env.PATH ?? ""}`;
    const started = Date.now();
    let ok = false;
    const child = spawn(command, args, { cwd, env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    const r: Running = { child, command: what, hard: false, cancelled: false };
    running.add(r);
    const cancel = () => {
      if (r.cancelled || child.exitCode !== null || child.pid === undefined) return;
      r.cancelled = true;
      signalGroup(child.pid, "SIGINT");
    };
    for (const s of signals) s.addEventListener("abort", cancel, { once: true });
    let stdout = "";
    let stderr = "";
    child.stdout!.on("data", (d: Buffer) => {
      stdout += d.toString();
      onOutput?.(d.toString());
    });
    child.stderr!.on("data", (d: Buffer) => {
      stderr += d.toString();
      onError?.(d.toString());
    });
    try {
      const code = await new Promise<number>((resolve, reject) => {
        child.once("error", reject);
        child.once("close", (c, sig) => resolve(c ?? (sig ? 128 : -1)));
      }).catch((e: Error) => {
        throw createCommandError(new CommandResult("", e.message, -2, e));
      });
      ok = code === 0;
      if (code === 0) return new CommandResult(stdout, stderr, code);
      if (r.cancelled) throw new EngineCancelledError(verb, r.hard, true, lastError(stderr));
      throw createCommandError(new CommandResult(stdout, stderr, code));
    } finally {
      const timing = {
        command: args
          .slice(0, 2)
          .filter((a) => !a.startsWith("-"))
          .join(" "),
        ms: Date.now() - started,
        ok,
      };
      for (const f of commandObservers) f(timing);
      running.delete(r);
      for (const s of signals) s.removeEventListener("abort", cancel);
    }
  }
  engine.run = run;
  return engine;
}
