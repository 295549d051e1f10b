// The dynamic provider molt loads before an `up` (orchestrator/stack/warm-provider.ts), with
// the real engine: the `up` attaches to it instead of starting its own, the environment molt
// hands over is the one its resources see (molt's teardown list travels that way), what it
// writes on stderr reaches molt, and it is gone once the `up` has ended.
import * as assert from "node:assert/strict";
import * as pulumi from "@pulumi/pulumi";
import { openStack } from "../../orchestrator/stack/driver";
import { WarmProviders } from "../../orchestrator/stack/warm-provider";
import { alive } from "../../lib/process";
import { pollUntil } from "../../lib/poll";
import { connect, type Socket } from "node:net";
import type { ChildProcess } from "node:child_process";
import { ENGINE_OWNER_VAR, ENGINE_TAG_VAR, engineTag } from "../../orchestrator/stack/engine-process";
import { engineProcessesOf } from "../../orchestrator/stack/leftovers";
import { makeWorkDir, type TestWorkDir } from "../support/workdir";

const probe: pulumi.dynamic.ResourceProvider = {
  async create() {
    console.error("molt-warm-provider-test: a line on stderr");
    return { id: "probe", outs: { pid: process.pid, seen: process.env.MOLT_WARM_TEST ?? "(unset)" } };
  },
};

class Probe extends pulumi.dynamic.Resource {
  declare readonly pid: pulumi.Output<number>;
  declare readonly seen: pulumi.Output<string>;
  constructor(name: string) {
    super(probe, name, { pid: undefined, seen: undefined }, {});
  }
}

describe("a dynamic provider loaded before its `up` (integration, real engine)", function () {
  let wd: TestWorkDir;
  before(() => (wd = makeWorkDir()));
  after(() => wd.cleanup());

  it("serves the `up` that attaches to it, with the environment molt handed over, then is gone", async () => {
    assert.ok(WarmProviders.usable(), "setpriv --pdeathsig is part of the lab's set-up (util-linux)");
    const stack = await openStack({
      stackName: "warm",
      workDir: wd.dir,
      env: wd.env,
      program: async () => {
        const p = new Probe("probe");
        return { pid: p.pid, seen: p.seen };
      },
    });
    const lines: string[] = [];
    const providers = new WarmProviders({
      env: () => ({ ...(process.env as Record<string, string>), ...stack.workspace.envVars }),
      onLine: (l) => lines.push(l),
    });
    try {
      providers.prepare();
      const attached = await providers.take({ MOLT_WARM_TEST: "handed over by molt" });
      assert.ok(attached, "a provider was loaded");
      Object.assign(stack.workspace.envVars, attached.env);
      const up = await stack.up();
      attached.end();
      assert.equal(up.summary.result, "succeeded");
      const out = await stack.outputs();
      assert.equal(out.pid.value, attached.pid, "the engine used the provider molt loaded, not one of its own");
      assert.equal(out.seen.value, "handed over by molt");
      assert.ok(lines.includes("molt-warm-provider-test: a line on stderr"), `stderr reached molt: ${lines}`);
      const deadline = Date.now() + 5_000;
      while (alive(attached.pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      assert.equal(alive(attached.pid), false, "killed once its `up` ended");

      // Without one, the engine starts its own provider, as before.
      delete stack.workspace.envVars.PULUMI_DEBUG_PROVIDERS;
      await stack.destroy();
      const again = await stack.up();
      assert.equal(again.summary.result, "succeeded");
      const own = await stack.outputs();
      assert.notEqual(own.pid.value, attached.pid);
      assert.equal(own.seen.value, "(unset)");
    } finally {
      providers.close();
      await stack.destroy().catch(() => undefined);
      await stack.workspace.removeStack("warm").catch(() => undefined);
    }
  });

  it("once molt is gone it serves an attached engine until that lets go, and a later run finds it", async () => {
    const tag = engineTag("file:///state/warm", "warm");
    const providers = new WarmProviders({
      env: () => ({
        ...(process.env as Record<string, string>),
        [ENGINE_TAG_VAR]: tag,
        [ENGINE_OWNER_VAR]: String(process.pid),
      }),
    });
    const internals = providers as unknown as {
      loading?: Promise<{ child: ChildProcess; port: number } | undefined>;
    };
    const loaded = async () => (await internals.loading)!;
    try {
      // Tagged like the engine: a later run's clean-up finds it (stack/leftovers.ts).
      providers.prepare();
      const idle = await loaded();
      assert.deepEqual(
        engineProcessesOf(tag).map((p) => [p.pid, p.kind]),
        [[idle.child.pid, "plugin"]],
      );
      // molt gone (its end of stdin closed) with no engine attached: it exits at once.
      idle.child.stdin!.end();
      await pollUntil(() => (alive(idle.child.pid!) ? undefined : true), {
        what: "the idle provider to exit",
        deadlineMs: 5000,
      });

      // With a connection to it (an engine that outlives molt), it stays until that closes.
      internals.loading = undefined;
      providers.prepare();
      const used = await loaded();
      const engine = await new Promise<Socket>((resolve, reject) => {
        const c = connect(used.port, "127.0.0.1", () => resolve(c));
        c.once("error", reject);
      });
      used.child.stdin!.end();
      await new Promise((r) => setTimeout(r, 1_000));
      assert.ok(alive(used.child.pid!), "serves the engine still attached to it");
      engine.destroy();
      await pollUntil(() => (alive(used.child.pid!) ? undefined : true), {
        what: "the provider to exit once its engine let go",
        deadlineMs: 5000,
      });
    } finally {
      providers.close();
    }
  });

  it("a provider that cannot take the environment is not used: the engine starts its own", async () => {
    const providers = new WarmProviders({ env: () => process.env as Record<string, string> });
    try {
      providers.prepare();
      // Loaded, then killed behind molt's back before its `up`.
      const first = await providers.take({});
      assert.ok(first);
      first.end();
      providers.prepare();
      const loading = (providers as unknown as { loading?: Promise<{ child: { kill(s: string): void } }> }).loading;
      (await loading)?.child.kill("SIGKILL");
      assert.equal(await providers.take({}), undefined);
    } finally {
      providers.close();
    }
  });
});
