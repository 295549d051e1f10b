// A throwaway Pulumi project directory and file backend for one test suite, so tests never
// touch the user's ~/.molt or the repository's stacks/.
import { mkdtempSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { repoRoot } from "../../orchestrator/stack/engine";

export interface TestWorkDir {
  dir: string;
  env: Record<string, string>;
  writeStackConfig(stack: string, yaml: string): void;
  cleanup(): void;
}

export function makeWorkDir(prefix = "molt-test-"): TestWorkDir {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  mkdirSync(join(dir, "stacks"));
  mkdirSync(join(dir, "state"));
  writeFileSync(join(dir, "Pulumi.yaml"), "name: molt\nruntime: nodejs\nstackConfigDir: stacks\n");
  symlinkSync(join(repoRoot, "node_modules"), join(dir, "node_modules"));
  const env = {
    PULUMI_BACKEND_URL: `file://${join(dir, "state")}`,
    PULUMI_CONFIG_PASSPHRASE: "molt-test-passphrase",
  };
  return {
    dir,
    env,
    writeStackConfig: (stack, yaml) => writeFileSync(join(dir, "stacks", `Pulumi.${stack}.yaml`), yaml),
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}
