// The object store and the stack lease on a real S3-compatible server (molt-s3 on loopback):
// S3's own conditional writes decide every race, the server's clock decides expiry, and a
// bucket that does not exist, refused credentials or an endpoint nobody listens on are bad
// input with a message that says which. A server frozen (SIGSTOP) during a held lease holds
// no run longer than the store's deadline, and no late write keeps a dead holder's lease.
import * as assert from "node:assert/strict";
import { BackendError } from "../../orchestrator/stack/driver";
import { S3Store } from "../../orchestrator/backend/s3";
import { readLease } from "../../orchestrator/lease/bucket";
import { leaseTakeover } from "../support/lease-takeover";
import { assertOutageDies, assertOutageReleases } from "../support/lease-outage";
import { freePort, startS3Server, type S3Server } from "../support/s3";
import { runCli } from "../support/cli";

describe("the S3 object store and lease (molt-s3 on loopback)", function () {
  this.timeout(60_000);
  let s3: S3Server;
  const saved: Record<string, string | undefined> = {};
  const setCreds = (c: Record<string, string>) => {
    for (const [k, v] of Object.entries(c)) process.env[k] = v;
  };
  before(async () => {
    s3 = await startS3Server(["molt-state"]);
    for (const k of ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]) saved[k] = process.env[k];
    setCreds(s3.credentials);
  });
  after(async () => {
    for (const [k, v] of Object.entries(saved))
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    await s3?.stop();
  });

  it("writes conditionally with If-None-Match / If-Match and deletes with If-Match", async () => {
    const s = new S3Store(s3.url("molt-state", "team-a"));
    await s.check();
    const e1 = await s.putIfAbsent("k.json", Buffer.from("1"));
    assert.ok(e1);
    assert.equal(await s.putIfAbsent("k.json", Buffer.from("2")), undefined);
    const e2 = await s.putIfMatch("k.json", Buffer.from("3"), e1);
    assert.ok(e2 && e2 !== e1);
    assert.equal(await s.putIfMatch("k.json", Buffer.from("4"), e1), undefined);
    assert.equal(await s.delete("k.json", e1), false, "a delete on a stale ETag is refused");
    assert.deepEqual(await s.list(""), ["k.json"], "keys are relative to the URL's prefix");
    assert.equal(await s.delete("k.json", e2), true);
    assert.equal(await s.get("k.json"), undefined);
    const skew = Math.abs((await s.now()).getTime() - Date.now());
    assert.ok(skew < 2000, `the server's clock is read (${skew} ms from ours)`);
  });

  it("lets exactly one of many concurrent conditional writers win", async () => {
    const s = new S3Store(s3.url("molt-state"));
    const e = (await s.putIfAbsent("race.json", Buffer.from("0")))!;
    const wins = await Promise.all(
      Array.from({ length: 12 }, (_, i) => s.putIfMatch("race.json", Buffer.from(`writer ${i}`), e)),
    );
    assert.equal(wins.filter(Boolean).length, 1);
  });

  it("holds a lease another runner sees, lets it expire by the server's clock, and reports the takeover", async () => {
    const url = s3.url("molt-state", "lease");
    // Runner A: another process holding the lease, SIGKILLed (it never releases it).
    const { b, runId, waitedMs: waited } = await leaseTakeover(url);
    assert.ok(waited >= 700, `taken only once expired (${waited} ms after A died)`);
    assert.equal(b.recoveredFrom?.reason, "expired");
    assert.equal(b.recoveredFrom?.holder.runId, runId);
    await b.release();
    assert.equal(await readLease(new S3Store(url), "prod"), undefined, "released: nothing left in the bucket");
  });

  it("frozen (SIGSTOP) under a lease: runs fail in time, a dead holder's late write holds nothing", async function () {
    this.timeout(120_000);
    await assertOutageDies("molt-s3", s3.url("molt-state", "outage-dies"), s3);
  });

  it("frozen while its holder gives the lease up and releases it: then the stack is free", async function () {
    this.timeout(120_000);
    await assertOutageReleases("molt-s3", s3.url("molt-state", "outage-releases"), s3);
  });

  it("says what is wrong with a bucket that does not exist, refused credentials, or no server", async () => {
    await assert.rejects(new S3Store(s3.url("no-such-bucket")).check(), (e: unknown) => {
      assert.ok(e instanceof BackendError);
      assert.match((e as Error).message, /the bucket no-such-bucket does not exist/);
      return true;
    });
    setCreds({ AWS_SECRET_ACCESS_KEY: "not-the-secret" });
    try {
      await assert.rejects(new S3Store(s3.url("molt-state")).check(), /refused the credentials/);
    } finally {
      setCreds(s3.credentials);
    }
    const port = await freePort();
    await assert.rejects(
      new S3Store(`s3://molt-state?endpoint=http://127.0.0.1:${port}&s3ForcePathStyle=true&region=us-east-1`).check(),
      /cannot reach http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\)/,
    );
  });

  it("status and plan on a bad bucket backend: exit 2 with what is wrong, nothing written", async () => {
    const port = await freePort();
    const rows: Array<[string, string, Record<string, string>, RegExp]> = [
      ["status", s3.url("no-such-bucket", "cli"), {}, /the bucket no-such-bucket does not exist/],
      ["plan", s3.url("molt-state", "cli"), { AWS_SECRET_ACCESS_KEY: "not-the-secret" }, /refused the credentials/],
      [
        "status",
        `s3://molt-state/cli?endpoint=http://127.0.0.1:${port}&s3ForcePathStyle=true&region=us-east-1`,
        {},
        /cannot reach http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\)/,
      ],
    ];
    for (const [command, url, env, message] of rows) {
      const run = await runCli([command, "--stack", "lab", "--json"], {
        ...s3.credentials,
        PULUMI_CONFIG_PASSPHRASE: "not-used",
        PULUMI_BACKEND_URL: url,
        ...env,
      });
      const what = `${command} on ${url}: exit ${run.code}: ${run.stdout.slice(-600)} ${run.stderr.slice(-600)}`;
      assert.equal(run.code, 2, what);
      const err = run.events.find((e) => e.type === "error") as { message?: string } | undefined;
      assert.match(String(err?.message), message, what);
      assert.match(String(err?.message), /nothing was changed/, what);
      assert.ok(!(run.stdout + run.stderr).includes(s3.credentials.AWS_SECRET_ACCESS_KEY), "no secret printed");
    }
    assert.deepEqual(await new S3Store(s3.url("molt-state", "cli")).list(""), [], "nothing written under the prefix");
  });
});
