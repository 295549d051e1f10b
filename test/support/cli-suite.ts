// What every CLI-driven e2e suite on the lab shares: a throwaway project and backend with
// its own molt home, the stored state of its stack, and a destroy that never fails the suite
// (a failed one is reported with the engine's output, and the lab cleaned).
import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { LabSettings } from "../../infra/lab/settings";
import { buildProgram } from "../../infra/program";
import { readStoredState } from "../../orchestrator/stack/state";
import { type StoredState } from "../../orchestrator/core/nodes";
import { openStack } from "../../orchestrator/stack/driver";
import { labLeftovers } from "./lab";
import { makeWorkDir, type TestWorkDir } from "./workdir";

export interface CliSuite {
  wd: TestWorkDir;
  /** Environment for the CLI: the suite's backend, project directory and molt home. */
  env: Record<string, string>;
  stored(): Promise<StoredState>;
  /** The URNs of the resources the stack's state holds. */
  exportedResources(): Promise<string[]>;
  /** Destroys the stack (reporting, not throwing, a failure) and removes the directory. */
  teardown(): Promise<void>;
}

export function cliSuite(prefix: string, stack: string, lab: LabSettings): CliSuite {
  const wd = makeWorkDir(prefix);
  mkdirSync(join(wd.dir, "home"));
  const env = { ...wd.env, MOLT_PROJECT_DIR: wd.dir, MOLT_HOME: join(wd.dir, "home") };
  return {
    wd,
    env,
    stored: async () =>
      readStoredState(
        await openStack({
          stackName: stack,
          workDir: wd.dir,
          env,
          create: false,
          program: buildProgram({ provider: "lab", nodes: [], sshUser: "root", lab, joinDeadlineSeconds: 60 }),
        }),
      ),
    exportedResources: async () => {
      const s = await openStack({ stackName: stack, workDir: wd.dir, env, create: false, program: async () => ({}) });
      const { deployment } = await s.exportStack();
      return ((deployment?.resources ?? []) as { urn: string }[]).map((r) => r.urn);
    },
    teardown: async () => {
      try {
        const s = await openStack({ stackName: stack, workDir: wd.dir, env, create: false, program: async () => ({}) });
        await s.destroy();
      } catch (e) {
        // The engine says what failed on stdout (its diagnostics), not on stderr: both, cut.
        const m = (e as Error).message;
        const part = (name: string, next: string) =>
          m.includes(`${name}:`)
            ? m.slice(m.indexOf(`${name}:`), m.indexOf(next) > 0 ? m.indexOf(next) : undefined)
            : "";
        console.log("    cleanup:", m.split("\n")[0]);
        console.log(`${part("stdout", "stderr:").slice(-3000)}\n${part("stderr", "err?:").slice(0, 600)}`);
      }
      // A failed destroy must not leave the lab to the next suite or to CI's check: named, then cleaned.
      const left = labLeftovers(lab);
      if (left.netns.length || left.haproxy.length) {
        console.log(`    cleanup: leftovers after destroy (${left.netns.join(", ")}), cleaning lab ${lab.lab}`);
        execFileSync("bash", ["tools/lab/clean.sh", lab.lab, lab.bridge], { stdio: "ignore" });
      }
      wd.cleanup();
    },
  };
}
