// Runs molt's CLI as a user would (a child process), collecting its --json events.
import { spawn, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { distDir } from "../../orchestrator/stack/engine";

export interface CliRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  events: Record<string, unknown>[];
  stdout: string;
  stderr: string;
}

export interface CliHandle {
  child: ChildProcess;
  /** Resolves with the run; `onEvent` sees each JSON event as it arrives. */
  done: Promise<CliRun>;
  /** SIGKILL the CLI and every process it started (its process group), like a killed CI job. */
  kill9: () => void;
}

export function startCli(
  args: string[],
  env: Record<string, string>,
  onEvent?: (e: Record<string, unknown>) => void,
  /** A command that execs the CLI (e.g. `unshare --uts` with its own host name): another "runner". */
  wrap: string[] = [],
): CliHandle {
  const argv = [process.execPath, join(distDir, "orchestrator", "cli", "main.js"), ...args];
  const child = spawn(wrap.length ? wrap[0] : argv[0], [...wrap.slice(1), ...(wrap.length ? argv : argv.slice(1))], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let stdout = "";
  let stderr = "";
  let buf = "";
  const events: Record<string, unknown>[] = [];
  child.stdout!.on("data", (d: Buffer) => {
    stdout += d.toString();
    buf += d.toString();
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      try {
        const e = JSON.parse(line) as Record<string, unknown>;
        events.push(e);
        onEvent?.(e);
      } catch {
        /* human output */
      }
    }
  });
  child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  const done = new Promise<CliRun>((resolve) =>
    child.on("close", (code, signal) => resolve({ code, signal, events, stdout, stderr })),
  );
  return {
    child,
    done,
    kill9: () => {
      // The engine runs in a session of its own (orchestrator/stack/engine-process.ts): a
      // killed CI job's process tree includes it, so it is killed too, group and all. Its
      // plugins run in groups of their own: whether they outlive it is what molt's
      // launcher decides (and the chaos harness's process invariant checks), never this.
      const engines = childrenOf(child.pid!).filter((pid) => commOf(pid) === "pulumi");
      for (const pid of [child.pid!, ...engines]) {
        try {
          process.kill(-pid, "SIGKILL");
        } catch {
          /* already gone */
        }
      }
    },
  };
}

function commOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, "utf8").trim();
  } catch {
    return "";
  }
}

/** The direct children of `pid`. */
export function childrenOf(pid: number): number[] {
  return readdirSync("/proc")
    .filter((p) => /^\d+$/.test(p))
    .map(Number)
    .filter((p) => {
      try {
        return Number(readFileSync(`/proc/${p}/stat`, "utf8").split(") ")[1].split(" ")[1]) === pid;
      } catch {
        return false;
      }
    });
}

export function runCli(args: string[], env: Record<string, string>): Promise<CliRun> {
  return startCli(args, env).done;
}

export function summaryOf(run: CliRun): {
  result: string;
  reason: string;
  operations: number;
  phases: Record<string, number>;
  wallMs: number;
  /** Nodes the run retired (replaced). */
  replaced: string[];
} {
  const s = run.events.find((e) => e.type === "summary");
  if (!s)
    throw new Error(
      `no summary event (exit ${run.code}); stderr: ${run.stderr.slice(-2000)}; stdout: ${run.stdout.slice(-2000)}`,
    );
  return s as never;
}
