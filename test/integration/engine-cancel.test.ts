// Cancelling the real engine the way molt does (orchestrator/stack/engine-process.ts): the
// run's AbortSignal gives the engine one SIGINT, so the step in flight finishes and no new
// one starts; a second signal (stopEnginesNow) terminates it, and the dynamic provider it
// started goes with it. A stack file the user wrote keeps its text when the stack is made.
import * as assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { EngineCancelledError, openStack, stopEnginesNow } from "../../orchestrator/stack/driver";
import { engineTag } from "../../orchestrator/stack/engine-process";
import { engineProcessesOf } from "../../orchestrator/stack/leftovers";
import { pollUntil } from "../../lib/poll";
import { alive } from "../../lib/process";
import { makeWorkDir, type TestWorkDir } from "../support/workdir";

// A step that takes as long as the test wants: create() records its pid, then waits until
// a release file appears (or 120 s pass).
/* eslint-disable @typescript-eslint/no-require-imports */
const gateProvider: pulumi.dynamic.ResourceProvider = {
  async create(inputs: { dir: string; name: string }) {
    const fs = require("node:fs");
    const path = require("node:path");
    fs.writeFileSync(path.join(inputs.dir, `${inputs.name}.started`), String(process.pid));
    const until = Date.now() + 120_000;
    while (!fs.existsSync(path.join(inputs.dir, `${inputs.name}.release`)) && Date.now() < until)
      await new Promise((r) => setTimeout(r, 100));
    return { id: inputs.name, outs: inputs };
  },
};
/* eslint-enable @typescript-eslint/no-require-imports */

class Gate extends pulumi.dynamic.Resource {
  constructor(name: string, args: { dir: string; name: string }, opts?: pulumi.CustomResourceOptions) {
    super(gateProvider, name, args, opts);
  }
}

describe("cancelling the engine (integration)", function () {
  let wd: TestWorkDir;
  beforeEach(() => (wd = makeWorkDir("molt-cancel-")));
  afterEach(() => wd.cleanup());

  const started = (name: string) =>
    pollUntil(() => (existsSync(join(wd.dir, `${name}.started`)) ? true : undefined), {
      what: `step ${name} to start`,
      deadlineMs: 60_000,
    });
  const program = async () => {
    const first = new Gate("first", { dir: wd.dir, name: "first" });
    new Gate("second", { dir: wd.dir, name: "second" }, { dependsOn: [first] });
    return {};
  };

  it("one signal: the step in flight finishes, no new step starts, the up fails as cancelled", async () => {
    const ac = new AbortController();
    const stack = await openStack({ stackName: "cancel", workDir: wd.dir, env: wd.env, program, signal: ac.signal });
    const up = stack.up();
    await started("first");
    ac.abort();
    // The engine waits for the step it runs: let it finish a moment after the cancel.
    writeFileSync(join(wd.dir, "first.release"), "");
    await assert.rejects(up, (e: unknown) => e instanceof EngineCancelledError && !e.hard && e.started);
    assert.ok(!existsSync(join(wd.dir, "second.started")), "no step started after the cancel");
    const urns = ((await stack.exportStack()).deployment.resources ?? []).map((r: { urn: string }) => r.urn);
    assert.ok(
      urns.some((u: string) => u.endsWith("::first")),
      `the finished step is in the state: ${urns}`,
    );
    const pending = (await stack.exportStack()).deployment.pending_operations ?? [];
    assert.deepEqual(pending, [], "a graceful cancel leaves nothing pending");
    await assert.rejects(stack.up(), (e: unknown) => e instanceof EngineCancelledError && !e.started);
  });

  it("a second signal terminates the engine, and its dynamic provider dies with it", async () => {
    const ac = new AbortController();
    const stack = await openStack({
      stackName: "hard",
      workDir: wd.dir,
      env: wd.env,
      program,
      signal: ac.signal,
      tagProcesses: true,
    });
    const up = stack.up();
    await started("first");
    const providerPid = Number(readFileSync(join(wd.dir, "first.started"), "utf8"));
    assert.ok(alive(providerPid));
    const tag = engineTag(wd.env.PULUMI_BACKEND_URL, "hard");
    assert.ok(
      engineProcessesOf(tag).some((p) => p.pid === providerPid && p.kind === "plugin"),
      "the provider carries the stack's tag",
    );
    ac.abort();
    const stopped = stopEnginesNow();
    assert.equal(stopped.length, 1, JSON.stringify(stopped));
    await assert.rejects(up, (e: unknown) => e instanceof EngineCancelledError && e.hard);
    await pollUntil(() => (alive(providerPid) ? undefined : true), {
      what: `the provider (pid ${providerPid}) to die with its engine`,
      deadlineMs: 20_000,
    });
    assert.deepEqual(engineProcessesOf(tag), [], "no engine process of the stack is left");
  });

  it("keeps the user's stack file when it creates the stack (only the salt is added)", async () => {
    const file = join(wd.dir, "stacks", "Pulumi.kept.yaml");
    const text = "# mine\nconfig:\n  molt:replicas: 3 # odd\n";
    writeFileSync(file, text);
    await openStack({ stackName: "kept", workDir: wd.dir, env: wd.env, program: async () => ({}) });
    const after = readFileSync(file, "utf8");
    assert.ok(after.startsWith(text), after);
    assert.match(after.slice(text.length), /^encryptionsalt: \S+\n$/);
  });
});
