// The dynamic provider molt loads once per run (orchestrator/stack/warm-provider.ts), with the
// real engine: each `up` attaches to it instead of starting its own, the environment molt
// hands over before each `up` is the one its resources see (molt's teardown list travels that
// way), what it writes on stderr reaches molt, an `up` that did not succeed ends it, and it
// lives on after molt only while an engine is attached to it.
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
    const env = process.env;
    return {
      id: "probe",
      outs: { pid: process.pid, seen: env.MOLT_WARM_TEST ?? "(unset)", once: env.MOLT_WARM_ONCE ?? "(unset)" },
    };
  },
};

class Probe extends pulumi.dynamic.Resource {
  declare readonly pid: pulumi.Output<number>;
  declare readonly seen: pulumi.Output<string>;
  declare readonly once: pulumi.Output<string>;
  constructor(name: string) {
    super(probe, name, { pid: undefined, seen: undefined, once: undefined }, {});
  }
}

describe("the run's dynamic provider, loaded before its first `up` (integration, real engine)", function () {
  let wd: TestWorkDir;
  before(() => (wd = makeWorkDir()));
  after(() => wd.cleanup());

  it("serves the run's `up`s that attach to it, each with the environment molt handed over", async () => {
    assert.ok(WarmProviders.usable(), "setpriv --pdeathsig is part of the lab's set-up (util-linux)");
    const stack = await openStack({
      stackName: "warm",
      workDir: wd.dir,
      env: wd.env,
      program: async () => {
        const p = new Probe("probe");
        return { pid: p.pid, seen: p.seen, once: p.once };
      },
    });
    const lines: string[] = [];
    const providers = new WarmProviders({
      env: () => ({ ...(process.env as Record<string, string>), ...stack.workspace.envVars }),
      onLine: (l) => lines.push(l),
    });
    const upWith = async (env: Record<string, string>, how: "up" | "destroy" = "up") => {
      const attached = await providers.take(env);
      assert.ok(attached, "a provider was loaded");
      Object.assign(stack.workspace.envVars, attached.env);
      const r = how === "up" ? await stack.up() : await stack.destroy();
      delete stack.workspace.envVars.PULUMI_DEBUG_PROVIDERS;
      return { attached, ok: r.summary.result === "succeeded" };
    };
    try {
      providers.prepare();
      const first = await upWith({ MOLT_WARM_TEST: "handed over by molt", MOLT_WARM_ONCE: "first up only" });
      assert.ok(first.ok);
      first.attached.end(true);
      let out = await stack.outputs();
      assert.equal(out.pid.value, first.attached.pid, "the engine used the provider molt loaded, not one of its own");
      assert.equal(out.seen.value, "handed over by molt");
      assert.equal(out.once.value, "first up only");
      assert.ok(lines.includes("molt-warm-provider-test: a line on stderr"), `stderr reached molt: ${lines}`);
      assert.ok(alive(first.attached.pid), "an `up` that succeeded leaves it to the next");

      // The next `up`s: the same process, each with its own environment (the last one's keys gone).
      const destroyed = await upWith({ MOLT_WARM_TEST: "the destroy's" }, "destroy");
      assert.ok(destroyed.ok);
      destroyed.attached.end(true);
      const second = await upWith({ MOLT_WARM_TEST: "the second up's" });
      assert.equal(second.attached.pid, first.attached.pid, "one provider for the run");
      out = await stack.outputs();
      assert.equal(out.seen.value, "the second up's");
      assert.equal(out.once.value, "(unset)", "a key only the first `up` had is gone");
      // One that did not succeed (here: said so) ends it.
      second.attached.end(false);
      await pollUntil(() => (alive(first.attached.pid) ? undefined : true), {
        what: "the provider to be killed",
        deadlineMs: 5000,
      });
      const attached = first.attached;

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
      current?: Promise<{ child: ChildProcess; port: number } | undefined>;
    };
    const loaded = async () => (await internals.current)!;
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
      internals.current = undefined;
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

  it("one that cannot take the environment is not used (the engine starts its own); the next is new", async () => {
    const providers = new WarmProviders({ env: () => process.env as Record<string, string> });
    const internals = providers as unknown as { current?: Promise<{ child: ChildProcess } | undefined> };
    try {
      providers.prepare();
      // Loaded, then killed behind molt's back before its `up`.
      const killed = (await internals.current)!.child;
      killed.kill("SIGKILL");
      await pollUntil(() => (killed.exitCode !== null || killed.signalCode !== null ? true : undefined), {
        what: "the provider to die",
        deadlineMs: 5000,
      });
      assert.equal(await providers.take({}), undefined);
      const next = await providers.take({});
      assert.ok(next, "a new one");
      assert.notEqual(next.pid, killed.pid);
      next.end(true);
    } finally {
      providers.close();
    }
  });
});
