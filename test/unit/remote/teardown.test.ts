// A node's teardown (RemoteCommand delete): never run on a machine a prune destroys (no
// connection at all); on a rolled-back node molt saw dead, skipped only if it still does not
// answer; a failing reset is tolerated and reported, never silent; any other node is never
// destroyed without its reset.
import * as assert from "node:assert/strict";
import { remove, type TeardownEdges } from "../../../infra/remote/command-impl";
import type { RemoteCommandInputs } from "../../../infra/remote/command";
import {
  TEARDOWN_SKIPS_ENV,
  encodeTeardownSkips,
  parseTeardownWarning,
  teardownSkipFor,
} from "../../../infra/remote/teardown";
import { teardownEnv, teardownWarning } from "../../../orchestrator/teardown";
import type { ExecResult } from "../../../infra/remote/ssh";

const HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDeadNodeHostKey molt";
const props: RemoteCommandInputs = {
  connection: { host: "10.77.110.12", port: 22, user: "root", privateKey: "(key)", hostKey: HOST_KEY },
  create: "true",
  delete: "kubeadm reset --force",
  environment: { NODE_NAME: "t10-cp-2" },
};
const deadEnv = {
  [TEARDOWN_SKIPS_ENV]: encodeTeardownSkips([
    { name: "t10-cp-2", host: "10.77.110.12", hostKey: HOST_KEY, when: "unreachable" },
  ]),
};
const destroyedEnv = {
  [TEARDOWN_SKIPS_ENV]: encodeTeardownSkips([
    { name: "t10-cp-2", host: "10.77.110.12", hostKey: HOST_KEY, when: "destroyed" },
  ]),
};

/** Fake edges: what the delete connected to, ran and reported. */
function edges(o: { env?: NodeJS.ProcessEnv; connects?: boolean; exec?: ExecResult | Error }) {
  const seen = { deadlines: [] as number[], commands: [] as string[], warnings: [] as string[], closed: 0 };
  const e: TeardownEdges = {
    env: o.env ?? {},
    warn: (line) => void seen.warnings.push(line),
    connect: async (_c, deadlineMs) => {
      seen.deadlines.push(deadlineMs);
      if (o.connects === false) throw new Error("connect ECONNREFUSED 10.77.110.12:22");
      return {
        exec: async (cmd: string) => {
          seen.commands.push(cmd);
          if (o.exec instanceof Error) throw o.exec;
          return o.exec ?? { stdout: "", stderr: "", code: 0 };
        },
        close: () => void seen.closed++,
      };
    },
  };
  return { e, seen };
}

describe("node teardown (infra/remote/command-impl.ts remove)", () => {
  it("tolerates a reset that fails on a live node and reports it with its last lines", async () => {
    const { e, seen } = edges({ exec: { stdout: "", stderr: "step 1\n[reset] error: unmount failed\n", code: 1 } });
    await remove(props, e);
    assert.equal(seen.commands.length, 1, "the reset ran");
    assert.match(seen.commands[0], /kubeadm reset --force/);
    assert.equal(seen.warnings.length, 1, "reported, never silent");
    const w = parseTeardownWarning(seen.warnings[0]);
    assert.equal(w?.node, "t10-cp-2");
    assert.match(w!.message, /teardown script failed on 10\.77\.110\.12.*exit 1.*unmount failed/);
    assert.equal(seen.closed, 1);
  });

  it("tolerates a session that drops during the reset, and says so", async () => {
    const { e, seen } = edges({ exec: new Error("Connection lost before handshake") });
    await remove(props, e);
    assert.match(parseTeardownWarning(seen.warnings[0])!.message, /SSH session failed: Connection lost/);
  });

  it("reports nothing when the reset succeeds", async () => {
    const { e, seen } = edges({});
    await remove(props, e);
    assert.equal(seen.commands.length, 1);
    assert.deepEqual(seen.warnings, []);
  });

  it("runs no reset on a machine a prune destroys, and does not even connect to it", async () => {
    for (const connects of [true, false]) {
      const { e, seen } = edges({ env: destroyedEnv, connects });
      await remove(props, e);
      assert.deepEqual(seen.deadlines, [], "no connection");
      assert.deepEqual(seen.commands, [], "no reset");
      assert.deepEqual(seen.warnings, [], "the normal path: nothing to report");
    }
  });

  it("skips the reset of a node molt saw dead that still does not answer, after one short connect", async () => {
    const { e, seen } = edges({ env: deadEnv, connects: false });
    await remove(props, e);
    assert.deepEqual(seen.commands, [], "no reset was attempted");
    assert.equal(seen.deadlines.length, 1);
    assert.ok(seen.deadlines[0] <= 10_000, `a short connect, not the boot deadline (${seen.deadlines[0]} ms)`);
    const w = parseTeardownWarning(seen.warnings[0]);
    assert.equal(w?.node, "t10-cp-2");
    assert.match(w!.message, /teardown skipped.*no etcd member.*ECONNREFUSED/);
  });

  it("resets a node molt saw dead when it answers after all", async () => {
    const { e, seen } = edges({ env: deadEnv });
    await remove(props, e);
    assert.equal(seen.commands.length, 1, "a node that answers is always reset");
    assert.deepEqual(seen.warnings, []);
  });

  it("never skips the reset of a node molt has not seen dead: an unreachable one fails the delete", async () => {
    const { e, seen } = edges({ connects: false });
    await assert.rejects(remove(props, e), /ECONNREFUSED/);
    assert.ok(seen.deadlines[0] >= 60_000, "the full connect deadline");
    assert.deepEqual(seen.warnings, []);
  });

  it("matches a listed node by address and pinned host key, never by address alone", () => {
    for (const env of [deadEnv, destroyedEnv]) {
      assert.equal(teardownSkipFor(props.connection, env)?.name, "t10-cp-2");
      assert.equal(teardownSkipFor({ ...props.connection, hostKey: "ssh-ed25519 AAAAother" }, env), undefined);
      assert.equal(teardownSkipFor({ ...props.connection, host: "10.77.110.13" }, env), undefined);
    }
    assert.equal(teardownSkipFor(props.connection, { [TEARDOWN_SKIPS_ENV]: "{not json" }), undefined);
    assert.equal(teardownSkipFor(props.connection, {}), undefined);
    // An entry that does not say when it is skipped names no node: its teardown runs.
    const vague = JSON.stringify([{ name: "t10-cp-2", host: "10.77.110.12", hostKey: HOST_KEY }]);
    assert.equal(teardownSkipFor(props.connection, { [TEARDOWN_SKIPS_ENV]: vague }), undefined);
  });

  it("the orchestrator skips every pruned machine's teardown, and a rollback's only when marked", () => {
    const endpoints = [
      {
        name: "t10-cp-2",
        privateAddress: "10.77.110.12",
        sshHost: "10.77.110.12",
        sshPort: 22,
        hostPublicKey: HOST_KEY,
        providerId: "lab://t10/t10-cp-2",
      },
    ];
    const when = (op: Parameters<typeof teardownEnv>[0]) =>
      teardownSkipFor(props.connection, teardownEnv(op, endpoints) ?? {})?.when;
    assert.equal(when({ kind: "prune", node: "t10-cp-2", reason: "retired" }), "destroyed");
    assert.equal(when({ kind: "prune-and-surge", node: "t10-cp-2", entry: {} as never, reason: "" }), "destroyed");
    assert.equal(when({ kind: "rollback", node: "t10-cp-2", reason: "dead", unreachable: true }), "unreachable");
    assert.equal(teardownEnv({ kind: "rollback", node: "t10-cp-2", reason: "failed join" }, endpoints), undefined);
    assert.equal(teardownEnv({ kind: "surge", entry: {} as never, reason: "" }, endpoints), undefined);
  });

  it("reads a teardown's report back from an engine diagnostic", () => {
    const line = `[molt warning] ${JSON.stringify({ node: "t10-cp-2", message: "teardown skipped" })}\n`;
    const w = teardownWarning({
      sequence: 1,
      timestamp: 0,
      diagnosticEvent: { message: line, color: "never", severity: "info#err" },
    });
    assert.deepEqual(w, { node: "t10-cp-2", message: "teardown skipped" });
    assert.equal(
      teardownWarning({
        sequence: 2,
        timestamp: 0,
        diagnosticEvent: { message: "ordinary output", color: "never", severity: "info" },
      }),
      undefined,
    );
  });
});
