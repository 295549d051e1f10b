// The state guard (infra/guard.ts) against the real engine and file backend: an `up` that
// carries the token the state holds goes through; an `up` decided on a state another run
// changed since (a stale token, or none where a guard exists: two runners that both read a
// stack with no cluster yet) fails before any other resource is touched, and leaves the
// state as it was. A hand-run preview ("keep") shows no change.
import * as assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import * as pulumi from "@pulumi/pulumi";
import type { Stack } from "@pulumi/pulumi/automation";
import { declareGuard, GUARD_NAME, type GuardMode } from "../../infra/guard";
import { openStack } from "../../orchestrator/stack/driver";
import { exportState, viewOf } from "../../orchestrator/stack/state";
import { makeWorkDir, type TestWorkDir } from "../support/workdir";

/* eslint-disable @typescript-eslint/no-require-imports */
// Stands for a node's resources: writes its content to a file on create and on update.
const fileProvider: pulumi.dynamic.ResourceProvider = {
  async create(inputs: { path: string; content: string }) {
    require("node:fs").writeFileSync(inputs.path, inputs.content);
    return { id: inputs.path, outs: inputs };
  },
  async diff(_id: string, olds: { content: string }, news: { content: string }) {
    return { changes: olds.content !== news.content };
  },
  async update(_id: string, _olds: unknown, news: { path: string; content: string }) {
    require("node:fs").writeFileSync(news.path, news.content);
    return { outs: news };
  },
  async delete(id: string) {
    require("node:fs").rmSync(id, { force: true });
  },
};
/* eslint-enable @typescript-eslint/no-require-imports */

class NodeFile extends pulumi.dynamic.Resource {
  constructor(name: string, args: { path: string; content: string }) {
    super(fileProvider, name, args, {});
  }
}

describe("the state guard (integration: the real engine, a file backend)", function () {
  this.timeout(120_000);
  let wd: TestWorkDir;
  let stack: Stack;
  let path: string;
  const programOf = (guard: GuardMode, content: string) => async () => {
    declareGuard(guard);
    new NodeFile("node-a", { path, content });
    return {};
  };
  const up = (guard: GuardMode, content: string) => {
    stack.workspace.program = programOf(guard, content);
    return stack.up();
  };
  const token = async () => viewOf(await exportState(stack)).guardToken;

  before(async () => {
    wd = makeWorkDir();
    path = join(wd.dir, "node-a.txt");
    stack = await openStack({
      stackName: "guard-proof",
      workDir: wd.dir,
      env: wd.env,
      program: programOf({ expect: "", token: "t1" }, "a"),
    });
  });
  after(async () => {
    await stack?.destroy().catch(() => undefined);
    wd?.cleanup();
  });

  it("creates the guard on a stack that has none, and every resource depends on it", async () => {
    assert.equal((await up({ expect: "", token: "t1" }, "a")).summary.result, "succeeded");
    assert.equal(await token(), "t1");
    const resources = (await exportState(stack)).resources;
    const guard = resources.find((r) => r.urn.endsWith(`::${GUARD_NAME}`))!;
    const node = resources.find((r) => r.urn.endsWith("::node-a"))!;
    assert.ok(node.dependencies?.includes(guard.urn), `node-a depends on the guard: ${node.dependencies}`);
  });

  it("refuses a second first `up` (read before the first wrote the stack), touching nothing", async () => {
    await assert.rejects(
      up({ expect: "", token: "t2" }, "b"),
      /molt-state-guard: this stack's state was changed by another run/,
    );
    assert.equal(readFileSync(path, "utf8"), "a", "node-a was not updated");
    assert.equal(await token(), "t1", "the guard still holds the first run's token");
  });

  it("lets an `up` with the stored token through, then refuses one decided on the state before it", async () => {
    assert.equal((await up({ expect: "t1", token: "t3" }, "c")).summary.result, "succeeded");
    assert.equal(readFileSync(path, "utf8"), "c");
    await assert.rejects(up({ expect: "t1", token: "t4" }, "d"), /the state holds t3, this run read t1/);
    assert.equal(readFileSync(path, "utf8"), "c", "a stale run changed nothing");
    assert.equal(await token(), "t3");
  });

  it("shows no change in a hand-run preview (declared as it is)", async () => {
    stack.workspace.program = programOf("keep", "c");
    const p = await stack.preview();
    assert.equal(p.changeSummary.update ?? 0, 0, JSON.stringify(p.changeSummary));
    assert.equal(p.changeSummary.same, 3, JSON.stringify(p.changeSummary));
  });
});
