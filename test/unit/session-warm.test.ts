// The session pool's warm-up (orchestrator/edges/sessions.ts): a surge's new node is
// connected while its `up` finishes, so the next observation does not pay for the connect.
// It must never cost that observation anything: a warm-up that hangs (a machine not up yet)
// races a fresh connect, a finished one is reused, and none outlives the pool.
import * as assert from "node:assert/strict";
import type { NodeEndpoint } from "../../orchestrator/core/nodes";
import type { SshSession, SshTarget } from "../../infra/remote/ssh";
import { SessionPool } from "../../orchestrator/edges/sessions";

interface FakeSession {
  target: SshTarget;
  open: boolean;
  close(): void;
}

const ep = (name: string): NodeEndpoint => ({
  name,
  privateAddress: `10.0.0.${name.length}`,
  sshHost: `host-${name}`,
  sshPort: 22,
  hostPublicKey: `ssh-ed25519 KEY-${name}`,
  providerId: `lab://${name}`,
});
const creds = { user: "root", privateKey: "PRIVATE" };

/** A connector whose connects are settled by the test: each call is recorded with its resolvers. */
function connector() {
  const calls: { host: string; resolve: () => FakeSession; reject: (e: Error) => void; session: FakeSession }[] = [];
  const connect = (target: SshTarget) =>
    new Promise<SshSession>((res, rej) => {
      const session: FakeSession = {
        target,
        open: true,
        close() {
          this.open = false;
        },
      };
      calls.push({
        host: target.host,
        session,
        resolve: () => (res(session as unknown as SshSession), session),
        reject: rej,
      });
    });
  return { calls, connect };
}

const tick = () => new Promise((r) => setImmediate(r));

describe("session pool warm-up (a new node connected before the next observation)", () => {
  it("a warm-up that finished is the session the next sync uses: no second connect", async () => {
    const c = connector();
    const pool = new SessionPool(c.connect);
    const a = pool.sync([ep("a")], creds);
    c.calls[0].resolve();
    await a;
    const warmed = pool.warm([ep("a"), ep("b")], creds);
    assert.deepEqual(
      c.calls.map((x) => x.host),
      ["host-a", "host-b"],
    );
    c.calls[1].resolve();
    assert.deepEqual(await warmed, ["b"]);
    await pool.sync([ep("a"), ep("b")], creds);
    assert.equal(c.calls.length, 2, "the sync opened no session of its own");
    assert.equal(pool.get("b"), c.calls[1].session as unknown as SshSession);
    assert.equal(pool.unreachable.size, 0);
  });

  it("a warm-up still hanging does not hold the sync: a fresh connect wins, the late one is closed", async () => {
    const c = connector();
    const pool = new SessionPool(c.connect);
    const a = pool.sync([ep("a")], creds);
    c.calls[0].resolve();
    await a;
    void pool.warm([ep("a"), ep("b")], creds); // left hanging on purpose: the sync must not wait for it
    const synced = pool.sync([ep("a"), ep("b")], creds);
    await tick();
    assert.equal(c.calls.length, 3, "the sync connected b itself besides the warm-up");
    const fresh = c.calls[2].resolve();
    await synced;
    assert.equal(pool.get("b"), fresh as unknown as SshSession);
    const late = c.calls[1].resolve();
    await tick();
    assert.equal(late.open, false, "the warm-up's late session was closed");
    assert.equal(pool.get("b"), fresh as unknown as SshSession);
  });

  it("a warm-up that failed costs nothing: the sync's own connect decides, its error recorded", async () => {
    const c = connector();
    const pool = new SessionPool(c.connect);
    const a = pool.sync([ep("a")], creds);
    c.calls[0].resolve();
    await a;
    const warmed = pool.warm([ep("b")], creds);
    const synced = pool.sync([ep("a"), ep("b")], creds);
    await tick();
    c.calls[1].reject(new Error("connect ECONNREFUSED (warm)"));
    c.calls[2].reject(new Error("connect ETIMEDOUT (sync)"));
    await synced;
    assert.deepEqual(await warmed, []);
    assert.equal(pool.get("b"), undefined);
    assert.equal(pool.unreachable.get("b"), "connect ETIMEDOUT (sync)");
  });

  it("a warm-up that lands after the pool closed is closed, not kept", async () => {
    const c = connector();
    const pool = new SessionPool(c.connect);
    const a = pool.sync([ep("a")], creds);
    c.calls[0].resolve();
    await a;
    const warmed = pool.warm([ep("b")], creds);
    pool.close();
    const late = c.calls[1].resolve();
    assert.deepEqual(await warmed, []);
    assert.equal(late.open, false);
    assert.deepEqual(pool.nodes(), []);
  });

  it("no warm-up before the pool knows its key, nor with another key (a rotated key is for the sync)", async () => {
    const c = connector();
    const pool = new SessionPool(c.connect);
    assert.deepEqual(await pool.warm([ep("a")], creds), []);
    const a = pool.sync([ep("a")], creds);
    c.calls[0].resolve();
    await a;
    assert.deepEqual(await pool.warm([ep("b")], { ...creds, privateKey: "ROTATED" }), []);
    assert.equal(c.calls.length, 1);
  });

  it("lists nodes in the order they were given, whatever order their connects completed in", async () => {
    const c = connector();
    const pool = new SessionPool(c.connect);
    const synced = pool.sync([ep("a"), ep("b"), ep("c")], creds);
    await tick();
    // The last one answers first: the order of "the first node" (whose etcd CA is trusted) is the caller's.
    c.calls[2].resolve();
    await tick();
    c.calls[1].resolve();
    await tick();
    c.calls[0].resolve();
    await synced;
    assert.deepEqual(pool.nodes(), ["a", "b", "c"]);
    await pool.sync([ep("c"), ep("a")], creds);
    assert.deepEqual(pool.nodes(), ["c", "a"], "the last sync's order, b dropped");
  });
});
