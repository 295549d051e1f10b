// A throwaway project for the loop's suites on fake edges: lab images (an image.json each),
// file backends, an empty stacks/ folder, and MOLT_HOME pointed inside it. `close()` removes it
// and gives MOLT_HOME back. (test/support/workdir.ts is the one for the real engine.)
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";

export interface FakeProject {
  readonly dir: string;
  /** Per backend folder: an environment whose PULUMI_BACKEND_URL names it. */
  readonly envs: Record<string, Record<string, string>>;
  close(): void;
}

/** `images`: lab image name to image.json's fields beside its name. */
export function fakeProject(
  prefix: string,
  images: Record<string, Record<string, unknown>>,
  backends: readonly string[] = ["backend"],
): FakeProject {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  for (const [name, fields] of Object.entries(images)) {
    mkdirSync(join(dir, "lab", "images", name), { recursive: true });
    writeFileSync(join(dir, "lab", "images", name, "image.json"), JSON.stringify({ name, ...fields }));
  }
  const envs: Record<string, Record<string, string>> = {};
  for (const b of backends) {
    mkdirSync(join(dir, b));
    envs[b] = { PULUMI_BACKEND_URL: `file://${join(dir, b)}` };
  }
  mkdirSync(join(dir, "stacks"));
  const saved = process.env.MOLT_HOME;
  process.env.MOLT_HOME = join(dir, "home");
  return {
    dir,
    envs,
    close() {
      if (saved === undefined) delete process.env.MOLT_HOME;
      else process.env.MOLT_HOME = saved;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A rollout's clock that runs a second per reading: a 10 s deadline passes in 10 polls. */
export function tickingClock(): () => number {
  let t = Date.now();
  return () => (t += 1000);
}

/** Writes the project's stack `lab` on the lab named `lab` (kept in the project), with `config` keys besides. */
export function writeLabStack(dir: string, lab: string, config: Record<string, unknown>): void {
  writeFileSync(
    join(dir, "stacks", "Pulumi.lab.yaml"),
    stringify({
      config: { "molt:provider": "lab", ...config, "molt:lab": { name: lab, root: join(dir, "lab") } },
    }),
  );
}
