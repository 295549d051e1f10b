// `plan` and `status` change nothing, not even the backend: on a backend that has no
// checkpoint of the stack they answer "not created yet" without starting the engine, whose
// first command on such a folder would write .pulumi/meta.yaml (and molt's default backend
// folder and passphrase file would be made on the way).
import * as assert from "node:assert/strict";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { main } from "../../orchestrator/cli/main";

function tree(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, encoding: "utf8" }).sort();
}

describe("plan and status write nothing (orchestrator/inspect.ts)", () => {
  let dir: string;
  let env: Record<string, string>;
  const engineRan = () => existsSync(join(dir, "engine-ran"));

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "molt-readonly-"));
    mkdirSync(join(dir, "project", "stacks"), { recursive: true });
    mkdirSync(join(dir, "lab", "images", "lab-v1"), { recursive: true });
    writeFileSync(join(dir, "lab", "images", "lab-v1", "image.json"), JSON.stringify({ name: "lab-v1" }));
    writeFileSync(
      join(dir, "project", "stacks", "Pulumi.ghost.yaml"),
      "config:\n  molt:provider: lab\n  molt:replicas: 3\n  molt:image: lab-v1\n" +
        `  molt:lab: { root: ${join(dir, "lab")} }\n`,
    );
    // An engine that says when it is started at all (version, select, anything).
    const engine = join(dir, "bin", "pulumi");
    mkdirSync(join(dir, "bin"));
    writeFileSync(engine, `#!/bin/sh\ntouch '${join(dir, "engine-ran")}'\n[ "$1" = version ] && echo v3.274.1\n`);
    chmodSync(engine, 0o755);
    mkdirSync(join(dir, "state"));
    env = {
      MOLT_PROJECT_DIR: join(dir, "project"),
      MOLT_HOME: join(dir, "home"),
      MOLT_CACHE: join(dir, "cache"),
      MOLT_PULUMI: engine,
      PULUMI_BACKEND_URL: `file://${join(dir, "state")}`,
    };
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  async function cli(args: string[], e: Record<string, string | undefined>): Promise<{ code: number; out: string }> {
    const saved = { ...process.env };
    for (const [k, v] of Object.entries(e))
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    const write = process.stdout.write.bind(process.stdout);
    let out = "";
    process.stdout.write = ((s: string) => ((out += s), true)) as typeof process.stdout.write;
    try {
      return { code: await main(args), out };
    } finally {
      process.stdout.write = write;
      for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
      Object.assign(process.env, saved);
    }
  }

  for (const what of ["plan", "status"])
    it(`${what} of a stack the backend lacks: "not created yet", the backend untouched, no engine`, async () => {
      const r = await cli([what, "--stack", "ghost", "--json"], env);
      assert.equal(r.code, 0, r.out);
      const i = JSON.parse(r.out) as { exists: boolean; next: { kind: string } };
      assert.equal(i.exists, false);
      assert.equal(i.next.kind, "create-first");
      assert.deepEqual(tree(join(dir, "state")), [], "no .pulumi/meta.yaml, nothing at all");
      assert.equal(engineRan(), false, "the engine was not started");
      assert.equal(existsSync(join(dir, "home")), false, "no ~/.molt (passphrase, state folder)");
    });

  it("plan on the default backend (~/.molt/state) of a fresh machine does not make it", async () => {
    const r = await cli(["plan", "--stack", "ghost"], { ...env, PULUMI_BACKEND_URL: undefined });
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /stack ghost \(not created yet\)/);
    assert.equal(existsSync(join(dir, "home")), false, "~/.molt was not made");
    assert.equal(engineRan(), false);
  });

  it("asks the engine when the backend holds a checkpoint of that name", async () => {
    mkdirSync(join(dir, "state", ".pulumi", "stacks", "molt"), { recursive: true });
    writeFileSync(join(dir, "state", ".pulumi", "stacks", "molt", "ghost.json"), "{}");
    await cli(["plan", "--stack", "ghost", "--json"], env);
    assert.equal(engineRan(), true);
  });
});
