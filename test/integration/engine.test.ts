// Proof that the Pulumi engine molt drives is real: the CLI built (or found) by
// tools/setup-engine.sh, the file backend, a dynamic provider in its own process, and
// secrets encrypted with the passphrase provider. Fails, never skips, without an engine.
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { locateEngine } from "../../orchestrator/stack/engine";
import { openStack } from "../../orchestrator/stack/driver";
import { makeWorkDir, type TestWorkDir } from "../support/workdir";

// A dynamic provider defined inline: serialized by value into the state and executed by
// the engine through the pulumi-resource-pulumi-nodejs launcher, hence the require() calls
// inside it: a serialized function cannot close over module imports.
/* eslint-disable @typescript-eslint/no-require-imports */
const fileProvider: pulumi.dynamic.ResourceProvider = {
  async create(inputs: { path: string; content: string }) {
    const fs = require("node:fs");
    fs.writeFileSync(inputs.path, inputs.content);
    return { id: inputs.path, outs: { ...inputs, pid: process.pid } };
  },
  async delete(id: string) {
    require("node:fs").rmSync(id, { force: true });
  },
};
/* eslint-enable @typescript-eslint/no-require-imports */

class LocalFile extends pulumi.dynamic.Resource {
  declare readonly pid: pulumi.Output<number>;
  constructor(name: string, args: { path: string; content: pulumi.Input<string> }) {
    super(fileProvider, name, { ...args, pid: undefined }, {});
  }
}

describe("the Pulumi engine (integration)", function () {
  let wd: TestWorkDir;
  before(() => (wd = makeWorkDir()));
  after(() => wd.cleanup());

  it("finds a version-stamped engine", () => {
    const engine = locateEngine();
    assert.match(engine.version, /^\d+\.\d+\.\d+/, "the CLI must report a real version, not 'dev'");
  });

  it("runs up, reads outputs and destroys a stack on the file backend", async () => {
    const target = join(wd.dir, "made-by-dynamic-provider.txt");
    const secretValue = "s3cr3t-" + Math.random().toString(36).slice(2);
    const stack = await openStack({
      stackName: "engine-proof",
      workDir: wd.dir,
      env: wd.env,
      program: async () => {
        const f = new LocalFile("file", { path: target, content: pulumi.secret(secretValue) });
        return { path: target, providerPid: f.pid, secret: pulumi.secret(secretValue) };
      },
    });

    const up = await stack.up();
    assert.equal(up.summary.result, "succeeded");
    assert.equal(up.summary.resourceChanges?.create, 2, "stack + dynamic resource");
    assert.equal(readFileSync(target, "utf8"), secretValue, "the dynamic provider really ran");

    const outputs = await stack.outputs();
    assert.equal(outputs.path.value, target);
    assert.equal(outputs.secret.secret, true);
    assert.equal(outputs.secret.value, secretValue);
    assert.notEqual(outputs.providerPid.value, process.pid, "the provider runs in its own process");

    // The backend is a real file backend, and the secret is stored encrypted.
    const stackFiles = readdirSync(join(wd.dir, "state", ".pulumi", "stacks", "molt"));
    assert.ok(
      stackFiles.some((f) => f.startsWith("engine-proof.json")),
      `state file written: ${stackFiles}`,
    );
    const state = readFileSync(join(wd.dir, "state", ".pulumi", "stacks", "molt", "engine-proof.json"), "utf8");
    assert.ok(!state.includes(secretValue), "secrets are encrypted in the state");

    const noop = await stack.up();
    assert.equal(noop.summary.resourceChanges?.same, 2, "a second up changes nothing");

    const destroyed = await stack.destroy();
    assert.equal(destroyed.summary.result, "succeeded");
    assert.equal(existsSync(target), false, "destroy ran the provider's delete");
    await stack.workspace.removeStack("engine-proof");
  });

  it("an empty metadata sidecar (a killed engine's) breaks plain Pulumi, not molt; molt writes none", async () => {
    const name = "sidecar-proof";
    const open = (onRepair?: (removed: string[]) => void) =>
      openStack({
        stackName: name,
        workDir: wd.dir,
        env: wd.env,
        program: async () => ({ answer: 42 }),
        ...(onRepair ? { onRepair } : {}),
      });
    const stack = await open();
    assert.equal((await stack.up()).summary.result, "succeeded");
    const dir = join(wd.dir, "state", ".pulumi", "stacks", "molt");
    const checkpoint = join(dir, `${name}.json`);
    assert.ok(existsSync(checkpoint), "the checkpoint was written");
    assert.ok(!existsSync(`${checkpoint}.attrs`), "molt's engine wrote no sidecar for the checkpoint");

    // What an engine killed inside fileblob's setAttrs leaves: the sidecar truncated, empty.
    writeFileSync(`${checkpoint}.attrs`, "");
    writeFileSync(join(dir, "other.json.attrs"), '{"user.content_type":"application/json"}\n');
    const engine = locateEngine();
    const plain = spawnSync(join(engine.binDir, "pulumi"), ["stack", "export", "--stack", name], {
      cwd: wd.dir,
      env: { ...process.env, ...wd.env, PULUMI_SKIP_UPDATE_CHECK: "true" },
      encoding: "utf8",
    });
    assert.notEqual(plain.status, 0, "plain pulumi cannot read the stack");
    assert.match(plain.stderr, /failed to load checkpoint: EOF/);

    let removed: string[] = [];
    const again = await open((r) => (removed = r));
    assert.deepEqual(removed, [`${checkpoint}.attrs`], "only the broken sidecar was removed");
    assert.ok(existsSync(join(dir, "other.json.attrs")), "a whole sidecar stays");
    assert.equal((await again.outputs()).answer.value, 42);
    await again.destroy();
    await again.workspace.removeStack(name);
  });
});
