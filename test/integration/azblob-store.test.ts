// The object store and the stack lease on Azure Blob, served by Azurite (the Azure Storage
// emulator) on loopback: the service's own conditional writes decide every race, its clock
// decides expiry, and a container that does not exist, refused credentials or an endpoint
// nobody listens on are bad input with a message that says which.
import * as assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { locateEngine } from "../../orchestrator/stack/engine";
import { BackendError } from "../../orchestrator/stack/driver";
import { AzureBlobStore } from "../../orchestrator/backend/azblob";
import { openStore, requireStore } from "../../orchestrator/backend/store";
import { acquireLock, lockStore, readLease } from "../../orchestrator/lease/bucket";
import { startAzurite, type AzuriteServer } from "../support/azurite";
import { leaseTakeover } from "../support/lease-takeover";
import { assertOutageDies, assertOutageReleases } from "../support/lease-outage";
import { freePort } from "../support/s3";

describe("the Azure Blob object store and lease (Azurite on loopback)", function () {
  this.timeout(120_000);
  let az: AzuriteServer;
  const saved: Record<string, string | undefined> = {};
  const VARS = [
    "AZURE_STORAGE_ACCOUNT",
    "AZURE_STORAGE_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_STORAGE_CONNECTION_STRING",
    "AZURE_STORAGEBLOB_CONNECTIONSTRING",
    "AZURE_STORAGE_DOMAIN",
    "AZURE_STORAGE_PROTOCOL",
    "AZURE_STORAGE_IS_CDN",
    "AZURE_STORAGE_IS_LOCAL_EMULATOR",
  ];
  const setCreds = (c: Record<string, string>) => {
    for (const [k, v] of Object.entries(c)) process.env[k] = v;
  };
  before(async () => {
    az = await startAzurite(["molt-state"]);
    for (const k of VARS) {
      saved[k] = process.env[k];
      delete process.env[k];
    }
    setCreds(az.credentials);
  });
  after(async () => {
    for (const [k, v] of Object.entries(saved))
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    await az?.stop();
  });

  it("writes conditionally with If-None-Match / If-Match and deletes with If-Match", async () => {
    const s = new AzureBlobStore(az.url("molt-state", "team-a"));
    await s.check();
    const e1 = await s.putIfAbsent("k.json", Buffer.from("1"));
    assert.ok(e1);
    assert.equal(await s.putIfAbsent("k.json", Buffer.from("2")), undefined);
    const got = await s.get("k.json");
    assert.equal(got?.body.toString(), "1");
    assert.equal(got?.etag, e1);
    const e2 = await s.putIfMatch("k.json", Buffer.from("3"), e1);
    assert.ok(e2 && e2 !== e1);
    assert.equal(await s.putIfMatch("k.json", Buffer.from("4"), e1), undefined);
    assert.equal(await s.putIfMatch("gone.json", Buffer.from("4"), e1), undefined, "If-Match on nothing");
    assert.equal(await s.delete("k.json", e1), false, "a delete on a stale ETag is refused");
    assert.deepEqual(await s.list(""), ["k.json"], "keys are relative to the URL's prefix");
    assert.equal(await s.delete("k.json", e2), true);
    assert.equal(await s.get("k.json"), undefined);
    assert.equal(await s.delete("k.json", e2), false, "a delete of nothing is refused");
    const skew = Math.abs((await s.now()).getTime() - Date.now());
    assert.ok(skew < 2000, `the service's clock is read (${skew} ms from ours)`);
  });

  it("is the store openStore, requireStore and lockStore pick for azblob://, shared by the backend", async () => {
    const url = az.url("molt-state");
    assert.ok(openStore(url) instanceof AzureBlobStore);
    assert.ok(requireStore(url, "verification records") instanceof AzureBlobStore);
    assert.equal(lockStore(url).scope, "backend");
    // A substring, not a RegExp: a base64 key may hold "+" and "/".
    assert.ok(!new AzureBlobStore(url).location.includes(az.credentials.AZURE_STORAGE_KEY.slice(0, 12)));
  });

  it("reaches the container with a connection string as the engine's driver does", async () => {
    const cs =
      `DefaultEndpointsProtocol=http;AccountName=${az.account};AccountKey=${az.credentials.AZURE_STORAGE_KEY};` +
      `BlobEndpoint=http://${az.address}/${az.account};`;
    // As the engine: the connection string names the account and its endpoint; no other variable is set.
    const s = new AzureBlobStore("azblob://molt-state/cs", {
      AZURE_STORAGE_ACCOUNT: "",
      AZURE_STORAGE_KEY: "",
      AZURE_STORAGE_CONNECTION_STRING: cs,
    });
    assert.equal(s.loc.credential, "connection-string");
    assert.equal(s.loc.account, az.account);
    const e = await s.putIfAbsent("k.json", Buffer.from("cs"));
    assert.ok(e);
    assert.equal((await new AzureBlobStore(az.url("molt-state", "cs")).get("k.json"))?.etag, e, "the same container");
    assert.doesNotMatch(s.location, /AccountKey/);
  });

  it("lets exactly one of many concurrent conditional writers win", async () => {
    const s = new AzureBlobStore(az.url("molt-state"));
    const created = await Promise.all(
      Array.from({ length: 12 }, (_, i) => s.putIfAbsent("new.json", Buffer.from(`creator ${i}`))),
    );
    assert.equal(created.filter(Boolean).length, 1, "one creator of an absent key");
    const e = (await s.get("new.json"))!.etag;
    const wins = await Promise.all(
      Array.from({ length: 12 }, (_, i) => s.putIfMatch("new.json", Buffer.from(`writer ${i}`), e)),
    );
    assert.equal(wins.filter(Boolean).length, 1, "one replacer of a version");
  });

  it("holds a lease another runner sees, lets it expire by the service's clock, and reports the takeover", async () => {
    const url = az.url("molt-state", "lease");
    // Runner A: another process holding the lease, SIGKILLed (it never releases it).
    const { b, runId, waitedMs: waited } = await leaseTakeover(url);
    assert.ok(waited >= 700, `taken only once expired (${waited} ms after A died)`);
    assert.equal(b.scope, "backend");
    assert.equal(b.recoveredFrom?.reason, "expired");
    assert.equal(b.recoveredFrom?.holder.runId, runId);
    await b.release();
    assert.equal(
      await readLease(new AzureBlobStore(url), "prod"),
      undefined,
      "released: nothing left in the container",
    );
  });

  it("keeps the lease in the container that holds the Pulumi engine's state", async () => {
    const url = az.url("molt-state", "engine");
    const dir = mkdtempSync(join(tmpdir(), "molt-azblob-engine-"));
    try {
      writeFileSync(join(dir, "Pulumi.yaml"), "name: azt\nruntime: yaml\n");
      const env = { ...process.env, PULUMI_HOME: join(dir, ".pulumi-home"), PULUMI_CONFIG_PASSPHRASE: "azurite" };
      const pulumi = join(locateEngine().binDir, "pulumi");
      execFileSync(pulumi, ["login", url], { cwd: dir, env, stdio: "pipe", timeout: 30_000 });
      execFileSync(pulumi, ["stack", "init", "dev", "--non-interactive"], {
        cwd: dir,
        env,
        stdio: "pipe",
        timeout: 30_000,
      });
      const lock = await acquireLock(url, "dev", "rollout", { ttlSeconds: 10 });
      try {
        assert.equal(lock.scope, "backend");
        const keys = await new AzureBlobStore(url).list("");
        assert.ok(keys.includes(".pulumi/stacks/azt/dev.json"), `the engine's state is there: ${keys.join(" ")}`);
        assert.ok(keys.includes(".molt/locks/dev.json"), `and molt's lease beside it: ${keys.join(" ")}`);
      } finally {
        await lock.release();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("frozen (SIGSTOP) under a lease: runs fail in time, a dead holder's late write holds nothing", async function () {
    this.timeout(120_000);
    await assertOutageDies("azurite", az.url("molt-state", "outage-dies"), az);
  });

  it("frozen while its holder gives the lease up and releases it: then the stack is free", async function () {
    this.timeout(120_000);
    await assertOutageReleases("azurite", az.url("molt-state", "outage-releases"), az);
  });

  it("says what is wrong with a container that does not exist, refused credentials, or no server", async () => {
    await assert.rejects(new AzureBlobStore(az.url("no-such-container")).check(), (e: unknown) => {
      assert.ok(e instanceof BackendError);
      assert.match((e as Error).message, /the container no-such-container does not exist in the account moltdev/);
      return true;
    });
    await assert.rejects(new AzureBlobStore(az.url("no-such-container")).get("k.json"), BackendError);
    const wrong = Buffer.from("not-the-key-but-base64-all-the-same").toString("base64");
    const refused = new AzureBlobStore(az.url("molt-state"), { AZURE_STORAGE_KEY: wrong });
    await assert.rejects(refused.check(), (e: unknown) => {
      assert.ok(e instanceof BackendError);
      assert.match(
        (e as Error).message,
        /refused the credentials \(AuthorizationFailure\): check AZURE_STORAGE_ACCOUNT/,
      );
      assert.doesNotMatch((e as Error).message, new RegExp(wrong.slice(0, 12)));
      return true;
    });
    await assert.rejects(refused.putIfAbsent("k.json", Buffer.from("x")), /refused the credentials/);
    const port = await freePort();
    const t0 = Date.now();
    await assert.rejects(
      new AzureBlobStore(`azblob://molt-state?domain=127.0.0.1:${port}&protocol=http`).check(),
      (e: unknown) => {
        assert.ok(e instanceof BackendError);
        assert.match((e as Error).message, /cannot reach http:\/\/127\.0\.0\.1:\d+\/moltdev \(ECONNREFUSED\)/);
        return true;
      },
    );
    assert.ok(Date.now() - t0 < 10_000, "an endpoint nobody listens on fails within seconds");
  });
});
