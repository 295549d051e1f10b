// The engine's version, asked once per binary (orchestrator/stack/engine.ts locateEngine):
// a fake `pulumi` that counts how often it is asked.
import * as assert from "node:assert/strict";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EngineMissingError, locateEngine } from "../../orchestrator/stack/engine";

describe("the engine's version (orchestrator/stack/engine.ts)", () => {
  let dir: string;
  let bin: string;
  const saved = { MOLT_PULUMI: process.env.MOLT_PULUMI, MOLT_CACHE: process.env.MOLT_CACHE };
  const asked = () => readFileSync(join(dir, "asked"), "utf8").length;
  const fake = (version: string) => {
    writeFileSync(bin, `#!/bin/sh\nprintf x >> ${JSON.stringify(join(dir, "asked"))}\necho ${version}\n`);
    chmodSync(bin, 0o755);
  };

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "molt-engine-version-"));
    bin = join(dir, "pulumi");
    writeFileSync(join(dir, "asked"), "");
    process.env.MOLT_PULUMI = bin;
    process.env.MOLT_CACHE = join(dir, "cache");
  });
  afterEach(() => {
    for (const [k, v] of Object.entries(saved))
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    rmSync(dir, { recursive: true, force: true });
  });

  it("asks a binary once, and again once it is replaced", () => {
    fake("v3.274.1");
    assert.equal(locateEngine().version, "3.274.1");
    assert.equal(locateEngine().version, "3.274.1");
    assert.equal(asked(), 1, "the second run reads the cache");
    fake("v3.275.0");
    assert.equal(locateEngine().version, "3.275.0", "a rewritten binary is asked again");
    assert.equal(asked(), 2);
  });

  it("asks again when the cache is unreadable, and never caches an answer that is not a version", () => {
    fake("v3.274.1");
    locateEngine();
    writeFileSync(join(dir, "cache", "engine-versions.json"), "{not json");
    assert.equal(locateEngine().version, "3.274.1");
    assert.equal(asked(), 2);
    fake("oops");
    assert.throws(() => locateEngine(), EngineMissingError);
    assert.throws(() => locateEngine(), EngineMissingError);
    assert.equal(asked(), 4, "a binary that printed no version is asked every time");
  });
});
