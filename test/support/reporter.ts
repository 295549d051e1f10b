// mocha's spec reporter plus one plain closing line, "N passed, N failed, N skipped",
// which CI reads as the run's verdict; and a watchdog for a run that cannot end.
//
// mocha (without --exit) lets the process end when nothing is left to do. A test that leaves
// a socket, timer or child behind keeps it alive forever after the verdict, and CI then waits
// until its own deadline and reports nothing. So once the run is over, the process gets
// EXIT_GRACE_MS to end by itself; after that the reporter names what is still open and ends
// it, failed (exit 1) even when every test passed: a leak is a defect of the suite.
import * as Mocha from "mocha";
import { execFileSync } from "node:child_process";

const EXIT_GRACE_MS = Number(process.env.MOLT_TEST_EXIT_GRACE_MS ?? 60_000);

/** What keeps this process alive: its open handles by kind, and its child processes. */
function openResources(): string {
  const kinds = new Map<string, number>();
  for (const r of process.getActiveResourcesInfo()) kinds.set(r, (kinds.get(r) ?? 0) + 1);
  const handles = [...kinds].map(([k, n]) => `${k} x${n}`).join(", ") || "none";
  let children = "";
  try {
    children = execFileSync("ps", ["-o", "pid=,etimes=,args=", "--ppid", String(process.pid)], {
      encoding: "utf8",
    })
      .split("\n")
      .filter((l) => l.trim() && !/\bps -o pid=/.test(l))
      .map((l) => `  ${l.trim().slice(0, 200)}`)
      .join("\n");
  } catch {
    // ps exits 1 when the process has no children
  }
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
        // mocha sets the exit code from its failures in an "exit" listener; this one runs after it.
        const code = Math.max(1, Number(process.exitCode ?? 0));
        process.on("exit", () => (process.exitCode = code));
        process.exit(code);
      }, EXIT_GRACE_MS).unref();
    });
  }
}

export = SpecWithSummary;
