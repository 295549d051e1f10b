// mocha's spec reporter plus one plain closing line, "N passed, N failed, N skipped",
// which CI reads as the run's verdict; and a watchdog for a run that cannot end.
//
// mocha (without --exit) lets the process end when nothing is left to do. A test that leaves
// a socket, timer or child behind keeps it alive forever after the verdict, and CI then waits
// until its own deadline and reports nothing. So once the run is over, the process gets
// EXIT_GRACE_MS to end by itself; after that the reporter names what is still open and ends
// it and the processes it started, failed (exit 1 at least) even when every test passed: a
// leak is a defect of the suite.
import * as Mocha from "mocha";
import { execFileSync } from "node:child_process";

const EXIT_GRACE_MS = graceMs(process.env.MOLT_TEST_EXIT_GRACE_MS);

function graceMs(v: string | undefined): number {
  if (v === undefined || v === "") return 60_000;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0)
    throw new Error(`MOLT_TEST_EXIT_GRACE_MS=${JSON.stringify(v)} is not a whole number of milliseconds (e.g. 60000)`);
  return n;
}

/** This process's children: pid and the line ps shows. */
function childProcesses(): { pid: number; line: string }[] {
  try {
    return execFileSync("ps", ["-o", "pid=,etimes=,args=", "--ppid", String(process.pid)], { encoding: "utf8" })
      .split("\n")
      .filter((l) => l.trim() && !/\bps -o pid=/.test(l))
      .map((l) => ({ pid: Number(l.trim().split(/\s+/)[0]), line: l.trim().slice(0, 200) }));
  } catch {
    return []; // ps exits 1 when the process has no children
  }
}

/** What keeps this process alive: its open handles by kind, and its child processes. */
function openResources(): string {
  const kinds = new Map<string, number>();
  for (const r of process.getActiveResourcesInfo()) kinds.set(r, (kinds.get(r) ?? 0) + 1);
  const handles = [...kinds].map(([k, n]) => `${k} x${n}`).join(", ") || "none";
  const children = childProcesses()
    .map((c) => `  ${c.line}`)
    .join("\n");
  return `open handles: ${handles}\nchild processes:${children ? `\n${children}` : " none"}`;
}

class SpecWithSummary extends Mocha.reporters.Spec {
  constructor(runner: Mocha.Runner, options?: Mocha.MochaOptions) {
    super(runner, options);
    runner.once(Mocha.Runner.constants.EVENT_RUN_END, () => {
      const s = this.stats;
      process.stdout.write(`\n${s.passes} passed, ${s.failures} failed, ${s.pending} skipped\n`);
      setTimeout(() => {
        process.stderr.write(
          `\nerror: the test process did not end ${EXIT_GRACE_MS / 1000} s after the run: a test left ` +
            `something open.\n${openResources()}\n`,
        );
        // What it started goes with it, group and all (a child started detached leads its own
        // group, and could hold CI's output open after this process is gone).
        for (const { pid } of childProcesses()) {
          for (const target of [-pid, pid]) {
            try {
              process.kill(target, "SIGKILL");
            } catch {
              /* not a group leader, or gone already */
            }
          }
        }
        // mocha sets the exit code from its failures in an "exit" listener; this one runs after it.
        const code = Math.min(255, Math.max(1, this.stats.failures, Number(process.exitCode ?? 0)));
        process.on("exit", () => (process.exitCode = code));
        process.exit(code);
      }, EXIT_GRACE_MS).unref();
    });
  }
}

export = SpecWithSummary;
