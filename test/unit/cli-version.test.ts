// `molt --version`, `-V` and `molt version`: molt's version, the engine's (located as a run
// locates it) and Node.js's, exit 0; a missing engine is said, not a failure.
import * as assert from "node:assert/strict";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { main } from "../../orchestrator/cli/main";
import { repoRoot } from "../../orchestrator/stack/engine";

async function cli(args: string[], env: Record<string, string>): Promise<{ code: number; out: string }> {
  const saved = { ...process.env };
  Object.assign(process.env, env);
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

describe("molt --version", () => {
  let dir: string;
  let engine: string;
  const molt = (JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as { version: string }).version;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), "molt-version-"));
    engine = join(dir, "pulumi");
    // An engine that answers `pulumi version` as the real one does.
    writeFileSync(engine, '#!/bin/sh\n[ "$1" = version ] && echo v3.271.4\n');
    chmodSync(engine, 0o755);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  for (const args of [["--version"], ["-V"], ["version"]])
    it(`\`molt ${args.join(" ")}\` prints molt's, the engine's and Node.js's versions, exit 0`, async () => {
      const r = await cli(args, { MOLT_PULUMI: engine, MOLT_CACHE: join(dir, "cache") });
      assert.equal(r.code, 0, r.out);
      assert.deepEqual(r.out.split("\n"), [
        `molt ${molt}`,
        `pulumi 3.271.4 (${engine})`,
        `node ${process.versions.node}`,
        "",
      ]);
    });

  it("`molt version --json` is one JSON document", async () => {
    const r = await cli(["version", "--json"], { MOLT_PULUMI: engine, MOLT_CACHE: join(dir, "cache") });
    assert.equal(r.code, 0);
    assert.deepEqual(JSON.parse(r.out), {
      molt,
      engine: { version: "3.271.4", path: engine },
      node: process.versions.node,
    });
  });

  it("says which engine is missing and why, still exit 0", async () => {
    const r = await cli(["--version"], { MOLT_PULUMI: join(dir, "nope"), MOLT_CACHE: join(dir, "cache") });
    assert.equal(r.code, 0);
    assert.match(r.out, new RegExp(`^molt ${molt.replace(/\./g, "\\.")}\n`));
    assert.match(r.out, /pulumi: none found \(MOLT_PULUMI=.*nope is not a usable Pulumi engine \(no such file\)/);
    assert.match(r.out, /\nnode \d+\.\d+\.\d+\n$/);
  });
});
