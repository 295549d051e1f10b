// Engine processes a killed run left behind. Every engine process of a rollout carries
// its stack's tag (stack/engine-process.ts) and passes it on to the plugins it starts; a
// run, once it holds the stack's locks, stops whatever still carries the tag before it
// acts: an engine CLI (its update would race this run) and provider plugins (a dynamic
// provider may still be running a remote step on a node).
import { readdirSync, readFileSync } from "node:fs";
import { pollUntil } from "../../lib/poll";
import { alive } from "../../lib/process";
import type { RolloutEvent } from "../events";
import { ENGINE_OWNER_VAR, ENGINE_TAG_VAR, engineTag } from "./engine-process";

export interface EngineProcess {
  pid: number;
  /** The molt process that started it (undefined: an engine of an older molt, which set none). */
  owner?: number;
  /** The command line, shortened. */
  command: string;
  kind: "engine" | "plugin";
}

export interface StoppedProcess extends EngineProcess {
  /** How it ended: on the first signal (SIGINT to an engine, SIGTERM to a plugin), or killed. */
  how: "stopped" | "killed";
}

function readArgv(pid: number): string[] {
  return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
}

/** The engine's own processes: the CLI, language hosts, and provider plugins (dynamic providers run in node). */
function kindOf(argv: string[]): EngineProcess["kind"] | undefined {
  const exe = argv[0]?.split("/").pop() ?? "";
  if (exe === "pulumi") return "engine";
  // molt's own start of the dynamic provider (stack/warm-provider.ts) is one too.
  if (
    exe.startsWith("pulumi-") ||
    argv.some((a) => /@pulumi\/pulumi\/cmd\/dynamic-provider|\/stack\/provider-host\.js$/.test(a))
  )
    return "plugin";
  return undefined;
}

/** Every live engine process carrying `tag` (never this process). */
export function engineProcessesOf(tag: string): EngineProcess[] {
  const want = `${ENGINE_TAG_VAR}=${tag}`;
  const found: EngineProcess[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    const pid = Number(entry);
    try {
      const argv = readArgv(pid);
      const kind = kindOf(argv);
      if (!kind) continue;
      const environ = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
      if (!environ.includes(want)) continue;
      const owner = Number(environ.find((v) => v.startsWith(`${ENGINE_OWNER_VAR}=`))?.split("=")[1]);
      found.push({ pid, kind, command: argv.join(" ").slice(0, 240), ...(owner > 0 ? { owner } : {}) });
    } catch {
      // gone, or another user's: not ours to read
    }
  }
  return found;
}

async function stop(p: EngineProcess, first: NodeJS.Signals, graceMs: number): Promise<StoppedProcess> {
  try {
    process.kill(p.pid, first);
  } catch {
    return { ...p, how: "stopped" };
  }
  try {
    await pollUntil(() => (alive(p.pid) && !isZombie(p.pid) ? undefined : true), {
      what: `${p.kind} process ${p.pid} to exit`,
      deadlineMs: graceMs,
      maxIntervalMs: 250,
    });
    return { ...p, how: "stopped" };
  } catch {
    try {
      process.kill(p.pid, "SIGKILL");
    } catch {
      /* gone meanwhile */
    }
    return { ...p, how: "killed" };
  }
}

function isZombie(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.startsWith("Z") ?? false;
  } catch {
    return true;
  }
}

/**
 * Stops every engine process left with `tag`: engines first (one SIGINT, the engine's
 * graceful cancel; killed after `engineGraceMs`), then the plugins still there (SIGTERM;
 * killed after `pluginGraceMs`). Returns what was stopped, for the run to report.
 */
export async function stopEngineLeftovers(
  tag: string,
  o: { engineGraceMs: number; pluginGraceMs?: number },
): Promise<StoppedProcess[]> {
  // Another live molt's engines are not left over (two runners on one machine, each with its own
  // home, before a stack without a cluster has one to hold its lease): only a dead owner's are.
  const left = (p: EngineProcess) => p.owner === undefined || (p.owner !== process.pid && !alive(p.owner));
  const engines = engineProcessesOf(tag).filter((p) => p.kind === "engine" && left(p));
  const stopped = await Promise.all(engines.map((p) => stop(p, "SIGINT", o.engineGraceMs)));
  const plugins = engineProcessesOf(tag).filter((p) => p.kind === "plugin" && left(p));
  stopped.push(...(await Promise.all(plugins.map((p) => stop(p, "SIGTERM", o.pluginGraceMs ?? 5000)))));
  return stopped;
}

/** A run's clean-up before it acts: stops what earlier runs of the stack left, and reports it. */
export async function clearEngineLeftovers(
  backend: string,
  stack: string,
  engineGraceSeconds: number,
  emit: (e: RolloutEvent) => void,
): Promise<number> {
  const processes = await stopEngineLeftovers(engineTag(backend, stack), { engineGraceMs: engineGraceSeconds * 1000 });
  if (processes.length) emit({ type: "engine-leftovers", processes });
  return processes.length;
}
