// run.close() gives back everything the run took, whatever fails on the way: a quiesce that
// throws must not leave the stack's lease held nor the nodes' sessions open.
import * as assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Edges } from "../../orchestrator/core/edges";
import { openRun, type Run } from "../../orchestrator/run/context";

describe("run.close (orchestrator/run/context.ts)", () => {
  let dir: string;
  let env: Record<string, string>;
  const runs: Run[] = [];

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "molt-run-close-"));
    mkdirSync(join(dir, "project", "stacks"), { recursive: true });
    mkdirSync(join(dir, "lab", "images", "lab-v1"), { recursive: true });
    writeFileSync(join(dir, "lab", "images", "lab-v1", "image.json"), JSON.stringify({ name: "lab-v1" }));
    writeFileSync(
      join(dir, "project", "stacks", "Pulumi.closing.yaml"),
      "config:\n  molt:provider: lab\n  molt:replicas: 3\n  molt:image: lab-v1\n" +
        `  molt:lab: { root: ${join(dir, "lab")} }\n`,
    );
    mkdirSync(join(dir, "state"));
    env = { PULUMI_BACKEND_URL: `file://${join(dir, "state")}` };
  });
  afterEach(async () => {
    // A lease a failing close left behind would keep renewing: given up here whatever the test saw.
    for (const r of runs.splice(0)) await r.lease?.release().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });

  /** Edges whose quiesce and session close throw (when asked), recording what was called. */
  function fakeEdges(calls: string[], fail: { quiesce?: boolean; close?: boolean }): Edges {
    return {
      stack: {
        quiesce: async () => {
          calls.push("quiesce");
          if (fail.quiesce) throw new Error("quiesce failed: the state export did not stop");
        },
        state: async () => ({ nodes: [], endpoints: [], sshUser: "root", orphans: [] }),
      },
      nodes: {
        close: async () => {
          calls.push("nodes.close");
          if (fail.close) throw new Error("closing the sessions failed");
        },
      },
    } as unknown as Edges;
  }

  async function openAndHold(edges: Edges): Promise<Run> {
    const run = await openRun({ stack: "closing", workDir: join(dir, "project"), env, edges: async () => edges });
    runs.push(run);
    await run.hold("rollout");
    await run.open({ change: {} });
    return run;
  }

  /** Whether another run can take the stack's lease now (it is refused while this process holds it). */
  async function leaseFree(): Promise<boolean> {
    const other = await openRun({
      stack: "closing",
      workDir: join(dir, "project"),
      env,
      edges: async () => fakeEdges([], {}),
    });
    runs.push(other);
    try {
      await other.hold("rollout");
      return true;
    } catch {
      return false;
    }
  }

  it("releases the lease and closes the sessions when quiesce throws, and throws quiesce's error", async () => {
    const calls: string[] = [];
    const run = await openAndHold(fakeEdges(calls, { quiesce: true }));
    await assert.rejects(run.close(), /quiesce failed/);
    assert.deepEqual(calls, ["quiesce", "nodes.close"]);
    assert.equal(await leaseFree(), true, "the lease was left held");
  });

  it("reports every failed step, the first as the cause", async () => {
    const calls: string[] = [];
    const run = await openAndHold(fakeEdges(calls, { quiesce: true, close: true }));
    const e = await run.close().then(
      () => assert.fail("close did not throw"),
      (err: unknown) => err,
    );
    assert.ok(e instanceof AggregateError, `not an AggregateError: ${String(e)}`);
    assert.match(e.message, /2 steps failed: quiesce failed.*; closing the sessions failed/);
    assert.deepEqual(
      e.errors.map((x: Error) => x.message),
      ["quiesce failed: the state export did not stop", "closing the sessions failed"],
    );
    assert.match((e.cause as Error).message, /quiesce failed/);
    assert.deepEqual(calls, ["quiesce", "nodes.close"]);
    assert.equal(await leaseFree(), true, "the lease was left held");
  });

  it("closes in order and throws nothing when every step succeeds", async () => {
    const calls: string[] = [];
    const run = await openAndHold(fakeEdges(calls, {}));
    assert.equal(await leaseFree(), false, "held: another run is refused");
    await run.close();
    await run.close(); // a second close is a no-op
    assert.deepEqual(calls, ["quiesce", "nodes.close"]);
    assert.equal(await leaseFree(), true);
  });
});
