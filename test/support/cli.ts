// Runs molt's CLI as a user would (a child process), collecting its --json events.
import { spawn, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
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
): CliHandle {
  const child = spawn(process.execPath, [join(distDir, "orchestrator", "cli", "main.js"), ...args], {
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
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        /* already gone */
      }
      // The engine starts its plugins in process groups of their own: a killed job's
      // cgroup would take them too, so do the same for plugins working in this project.
      const project = env.MOLT_PROJECT_DIR;
      if (!project) return;
      for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
        try {
          if (
            readlinkSync(`/proc/${pid}/cwd`) === project &&
            readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("dynamic-provider")
          )
            process.kill(Number(pid), "SIGKILL");
        } catch {
          /* gone, or not ours to read */
        }
      }
    },
  };
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
} {
  const s = run.events.find((e) => e.type === "summary");
  if (!s)
    throw new Error(
      `no summary event (exit ${run.code}); stderr: ${run.stderr.slice(-2000)}; stdout: ${run.stdout.slice(-2000)}`,
    );
  return s as never;
}
