// What every CLI-driven e2e suite on the lab shares: a throwaway project and backend with
// its own molt home, the stored state of its stack, and a destroy that never fails the suite.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { LabSettings } from "../../infra/lab/settings";
import { buildProgram } from "../../infra/program";
import { readStoredState } from "../../orchestrator/stack/state";
import { type StoredState } from "../../orchestrator/core/nodes";
import { openStack } from "../../orchestrator/stack/driver";
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
        const m = (e as Error).message;
        console.log(
          "    cleanup:",
          m.split("\n")[0],
          m.includes("stderr:") ? m.slice(m.indexOf("stderr:"), m.indexOf("stderr:") + 300) : "",
        );
      }
      wd.cleanup();
    },
  };
}
