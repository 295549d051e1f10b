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
  constructor(name: string, args: { path: string; content: pulumi.Input<string> }, dependsOn: pulumi.Resource[] = []) {
    super(fileProvider, name, { ...args, pid: undefined }, { dependsOn });
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

  // The rule that makes molt register every node in every change (stack/targets.ts): the
  // engine keeps a resource the program leaves out only while nothing it depends on is
  // targeted; otherwise it takes it for one to destroy and refuses the `up` (diagnostic 2014).
  // molt's nodes depend on the load balancer and the client key, which every change targets
  // so that their settings apply. Session 23 measured it by registering only the nodes a
  // change touches: every surge failed so (docs/benchmarks.md, the prune's per-node growth).
  for (const [dependsOnTarget, title] of [
    [false, "depending on no target keeps it"],
    [true, "depending on a target refuses the update and keeps it"],
  ] as const)
    it(`a targeted up whose program leaves out an untargeted resource ${title}`, async () => {
      const name = `target-proof-${dependsOnTarget ? "dep" : "free"}`;
      const path = (n: string) => join(wd.dir, `${name}-${n}.txt`);
      const open = (withB: boolean) =>
        openStack({
          stackName: name,
          workDir: wd.dir,
          env: wd.env,
          program: async () => {
            const a = new LocalFile("a", { path: path("a"), content: "a" });
            if (withB) new LocalFile("b", { path: path("b"), content: "b" }, dependsOnTarget ? [a] : []);
            return {};
          },
        });
      const both = await open(true);
      assert.equal((await both.up()).summary.result, "succeeded");
      const urnsOf = async (s: typeof both) =>
        ((await s.exportStack()).deployment?.resources ?? []).map((r: { urn: string }) => r.urn) as string[];
      const before = await urnsOf(both);
      const urnOf = (n: string) => before.find((u) => u.endsWith(`::${n}`))!;

      const onlyA = await open(false);
      const up = onlyA.up({ target: [urnOf("a")] });
      if (dependsOnTarget)
        await assert.rejects(up, (e: Error) =>
          /'[^']*::b' will be destroyed but was not specified in --target list/.test(e.message),
        );
      else assert.equal((await up).summary.result, "succeeded");
      assert.ok((await urnsOf(onlyA)).includes(urnOf("b")), "the resource left out is still in the state");
      assert.equal(readFileSync(path("b"), "utf8"), "b", "and its provider's delete never ran");

      await both.destroy();
      await both.workspace.removeStack(name);
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
