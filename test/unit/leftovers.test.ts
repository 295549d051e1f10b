// Engine processes a killed run left: found by their stack's tag, stopped, reported; an
// untagged process or another stack's is never touched. Real processes, no engine.
import * as assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { ENGINE_OWNER_VAR, ENGINE_TAG_VAR, engineTag } from "../../orchestrator/stack/engine-process";
import { engineProcessesOf, stopEngineLeftovers } from "../../orchestrator/stack/leftovers";
import { alive } from "../../lib/process";
import { pollUntil } from "../../lib/poll";

/** A process that looks like a dynamic provider plugin (its argv names the host), optionally ignoring SIGTERM. */
async function fakePlugin(tag: string | undefined, ignoreTerm = false, owner?: number): Promise<ChildProcess> {
  const handler = ignoreTerm ? "process.on('SIGTERM', () => {});" : "";
  const script = `${handler} setInterval(() => {}, 1000); console.log("ready");`;
  const child = spawn(process.execPath, ["-e", script, "/x/node_modules/@pulumi/pulumi/cmd/dynamic-provider"], {
    env: {
      ...process.env,
      ...(tag ? { [ENGINE_TAG_VAR]: tag } : {}),
      ...(owner ? { [ENGINE_OWNER_VAR]: String(owner) } : {}),
    },
    stdio: ["ignore", "pipe", "ignore"],
  });
  // Its handlers are installed once it says so.
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once("data", () => resolve());
    child.once("exit", () => reject(new Error("the fake plugin exited")));
  });
  return child;
}

describe("engine processes left by a killed run", () => {
  const mine = engineTag("file:///state/a", "lab");
  const children: ChildProcess[] = [];
  afterEach(() => {
    for (const c of children.splice(0)) c.kill("SIGKILL");
  });

  it("tags differ per stack and per backend", () => {
    assert.notEqual(engineTag("file:///state/a", "lab"), engineTag("file:///state/b", "lab"));
    assert.notEqual(engineTag("file:///state/a", "lab"), engineTag("file:///state/a", "prod"));
    assert.match(mine, /^lab@[0-9a-f]{16}$/);
  });

  it("finds and stops the stack's plugins, and only those", async () => {
    const [left, stubborn, other, untagged] = await Promise.all([
      fakePlugin(mine),
      fakePlugin(mine, true),
      fakePlugin(engineTag("file:///state/a", "prod")),
      fakePlugin(undefined),
    ]);
    children.push(left, stubborn, other, untagged);
    assert.deepEqual(
      engineProcessesOf(mine)
        .map((p) => p.pid)
        .sort(),
      [left.pid, stubborn.pid].sort(),
    );
    assert.ok(engineProcessesOf(mine).every((p) => p.kind === "plugin"));

    const stopped = await stopEngineLeftovers(mine, { engineGraceMs: 1000, pluginGraceMs: 1000 });
    assert.deepEqual(
      stopped.map((p) => [p.pid, p.how]).sort(),
      [
        [left.pid, "stopped"],
        [stubborn.pid, "killed"],
      ].sort(),
    );
    await pollUntil(() => (!alive(left.pid!) && !alive(stubborn.pid!) ? true : undefined), {
      what: "the stopped plugins to be gone",
      deadlineMs: 5000,
    });
    assert.ok(alive(other.pid!), "another stack's plugin is untouched");
    assert.ok(alive(untagged.pid!), "an untagged process is untouched");
    assert.deepEqual(engineProcessesOf(mine), []);
  });

  it("never stops a live molt's engines (another runner on this machine), only a dead one's", async () => {
    const owner = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" });
    const dead = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
    await new Promise((r) => dead.once("exit", r));
    children.push(owner);
    const [live, orphan, ours] = await Promise.all([
      fakePlugin(mine, false, owner.pid),
      fakePlugin(mine, false, dead.pid),
      fakePlugin(mine, false, process.pid),
    ]);
    children.push(live, orphan, ours);
    const stopped = await stopEngineLeftovers(mine, { engineGraceMs: 1000, pluginGraceMs: 1000 });
    assert.deepEqual(
      stopped.map((p) => p.pid),
      [orphan.pid],
    );
    assert.ok(alive(live.pid!), "a live molt's plugin is untouched");
    assert.ok(alive(ours.pid!), "this run's own plugin is untouched");
  });

  it("reports nothing when nothing is left", async () => {
    assert.deepEqual(await stopEngineLeftovers(mine, { engineGraceMs: 1000 }), []);
  });
});
