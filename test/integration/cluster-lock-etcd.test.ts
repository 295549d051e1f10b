// The lease in the cluster against a real etcd (Debian's, on loopback, no TLS: the lab's
// rollouts reach it over SSH tunnels with mutual TLS, chaos/run.ts --only cluster-lock): the
// transaction that takes a free stack has one winner among 12, a runner in another process
// keeps its lease alive past its time to live, and once it is SIGKILLed the stack is taken
// (reported) only after etcd itself let its lease go. Every call goes to the first member that
// answers: a dead endpoint listed first changes nothing.
import { spawnEtcd, untilEtcdAnswers } from "../support/etcd-process";
import * as assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Etcd3 } from "etcd3";
import { acquireClusterLock, clusterLockKeys, etcdLeaseKv, readClusterLease } from "../../orchestrator/lease/cluster";
import { type LeaseKv } from "../../orchestrator/core/edges";
import { ConcurrentRolloutError, type HeldLock } from "../../orchestrator/lease/bucket";
import { distDir } from "../../orchestrator/stack/engine";
import { freePort } from "../support/s3";

describe("the rollout lock in a real etcd", function () {
  this.timeout(60_000);
  let dir: string;
  let etcd: ChildProcess;
  let url: string;
  let dead: string;
  const clients: Etcd3[] = [];
  const kvOf = (...hosts: string[]): LeaseKv => {
    const cs = hosts.map((h) => new Etcd3({ hosts: h, defaultCallOptions: () => ({ deadline: Date.now() + 2_000 }) }));
    clients.push(...cs);
    return etcdLeaseKv(`etcd at ${hosts.join(", ")}`, () => cs);
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "molt-etcd-lock-"));
    const [client, peer, nobody] = [await freePort(), await freePort(), await freePort()];
    url = `http://127.0.0.1:${client}`;
    dead = `http://127.0.0.1:${nobody}`;
    etcd = spawnEtcd(dir, url, peer);
    const probe = new Etcd3({ hosts: url });
    await untilEtcdAnswers(probe);
    probe.close();
  });
  after(() => {
    clients.forEach((c) => c.close());
    etcd?.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  });

  it("has exactly one winner among 12 concurrent takers, and a release leaves nothing behind", async () => {
    const kv = kvOf(url);
    const tries = await Promise.allSettled(
      Array.from({ length: 12 }, (_, i) =>
        acquireClusterLock(kv, "race", "rollout", {
          ttlSeconds: 10,
          identity: { host: `runner-${i}`, machine: `m${i}` },
        }),
      ),
    );
    const won = tries.filter((t): t is PromiseFulfilledResult<HeldLock> => t.status === "fulfilled");
    assert.equal(won.length, 1);
    for (const t of tries)
      if (t.status === "rejected") assert.ok(t.reason instanceof ConcurrentRolloutError, String(t.reason));
    assert.equal((await readClusterLease(kv, "race"))?.runId, won[0].value.holder.runId);
    await won[0].value.release();
    const { key, last } = clusterLockKeys("race");
    assert.equal(await kv.get(key), undefined);
    assert.equal(await kv.get(last), undefined);
  });

  it("keeps a live runner's lease; takes it (reported) once etcd let the SIGKILLed runner's go", async () => {
    // Runner A: another process, through a dead endpoint first.
    const a = spawn(
      process.execPath,
      [
        "-e",
        `const { Etcd3 } = require("etcd3");
         const m = require(${JSON.stringify(join(distDir, "orchestrator", "lease", "cluster.js"))});
         const cs = [process.env.DEAD, process.env.URL].map((h) => new Etcd3({ hosts: h,
           defaultCallOptions: () => ({ deadline: Date.now() + 1000 }) }));
         m.acquireClusterLock(m.etcdLeaseKv("etcd", () => cs), "prod", "rollout",
           { ttlSeconds: 3, identity: { host: "runner-a", machine: "a" } })
          .then((l) => { console.log("held " + l.holder.runId); setInterval(() => {}, 1000); });`,
      ],
      { env: { ...process.env, URL: url, DEAD: dead }, stdio: ["ignore", "pipe", "inherit"], cwd: join(distDir, "..") },
    );
    const runId = await new Promise<string>((resolve, reject) => {
      a.stdout!.on("data", (d: Buffer) => {
        const m = /held (\S+)/.exec(d.toString());
        if (m) resolve(m[1]);
      });
      a.on("exit", (c) => reject(new Error(`runner A exited ${c}`)));
    });
    const kv = kvOf(url);
    const asB = () =>
      acquireClusterLock(kv, "prod", "rollout", { ttlSeconds: 3, identity: { host: "runner-b", machine: "b" } });
    await new Promise((r) => setTimeout(r, 4_000)); // longer than its ttl: A kept it alive
    await assert.rejects(asB(), (e: unknown) => {
      assert.ok(e instanceof ConcurrentRolloutError);
      assert.equal(e.holder.runId, runId);
      assert.ok(e.expiresInSeconds! > 0 && e.expiresInSeconds! <= 3, `etcd's time left: ${e.expiresInSeconds}`);
      return true;
    });
    a.kill("SIGKILL");
    const t0 = Date.now();
    let b: HeldLock | undefined;
    let refusals = 0;
    while (!b) {
      b = await asB().catch((e: unknown) => {
        if (!(e instanceof ConcurrentRolloutError)) throw e;
        refusals++;
        return undefined;
      });
      if (!b) await new Promise((r) => setTimeout(r, 200));
    }
    const waited = Date.now() - t0;
    assert.ok(refusals > 0, "refused right after the kill");
    assert.ok(waited >= 1_000 && waited < 8_000, `taken ${waited} ms after the kill`);
    assert.equal(b.recoveredFrom?.reason, "expired");
    assert.equal(b.recoveredFrom?.holder.runId, runId);
    assert.equal(b.recoveredFrom?.holder.host, "runner-a");
    console.log(`      (taken ${waited} ms after the kill, ${refusals} refusals before)`);
    await b.release();
  });
});
