// What a verification record is trusted for (orchestrator/promotion/): a record edited in any
// field is refused, and promote says what the source cluster runs, where a records backend
// came from, and which flag names a bad stack. Fake clusters, real file backends.
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { FileStore } from "../../orchestrator/backend/file";
import type { EdgeFactory } from "../../orchestrator/edges/open";
import { PromotionRefusedError } from "../../orchestrator/promotion/errors";
import type { PromoteEvent } from "../../orchestrator/promotion/events";
import { promote } from "../../orchestrator/promotion/promote";
import { readRecord, recordKey } from "../../orchestrator/promotion/record";
import type { Release } from "../../orchestrator/promotion/release";
import { recordBytes, recordDigestOf, type VerificationRecord } from "../../orchestrator/promotion/record";
import { generateSigningKeyPair, loadSigner, SigningKeyError } from "../../orchestrator/promotion/signing";
import { verify } from "../../orchestrator/promotion/verify";
import { rollout } from "../../orchestrator/rollout";
import { FakeWorld } from "../support/fake-edges";
import { stagedStacks, type StagedStacks } from "../support/staged-stacks";

describe("trusting verification records (fake edges, file backends)", function () {
  let t: StagedStacks;
  let dir: string;
  let stagingEnv: Record<string, string>;
  let prodEnv: Record<string, string>;
  let stagingStore: FileStore;
  let worlds: StagedStacks["worlds"];
  const edges: EdgeFactory = (o) => t.edges(o);

  const release = (name: string, image: string): Release => ({ name, images: { staging: image, prod: image } });
  const stackFile = (stack: string) => t.stackFile(stack);
  const writeStack = (stack: string, image: string, extra: Record<string, unknown> = {}) =>
    t.writeStack(stack, image, extra);
  const stagingConfig = (r: Release, soakMinutes = 0) =>
    writeStack("staging", r.images.staging, { "molt:release": r, "molt:promotion": { soakMinutes } });
  const prodConfig = (r: Release | undefined, source: Record<string, unknown> = {}) =>
    writeStack("prod", r?.images.prod ?? "lab-v1", {
      ...(r ? { "molt:release": r } : {}),
      "molt:promotion": {
        requireVerifiedOn: [{ stack: "staging", backend: stagingEnv.PULUMI_BACKEND_URL, ...source }],
      },
    });

  const roll = (stack: string, o: { verify?: boolean } = {}) => t.roll(stack, o);
  const verifyStaging = (signingKeyFile?: string) =>
    verify({
      stack: "staging",
      workDir: dir,
      env: stagingEnv,
      edges,
      soakIntervalMs: 1,
      ...(signingKeyFile ? { signingKeyFile } : {}),
    });
  /** A key pair as molt keygen makes it: the private key in a file of the signing environment. */
  function keyPair(name: string) {
    const k = generateSigningKeyPair();
    const file = join(dir, `${name}.pem`);
    writeFileSync(file, k.privatePem, { mode: 0o600 });
    return { ...k, file };
  }
  async function promoteToProd(o: { from?: string; to?: string } = {}) {
    const events: PromoteEvent[] = [];
    const r = await promote({
      from: o.from ?? "staging",
      to: o.to ?? "prod",
      workDir: dir,
      env: prodEnv,
      edges,
      onEvent: (e) => events.push(e),
    }).catch((e: Error) => e);
    return { r, events };
  }
  const escape = (x: string) => x.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
  const refusedWith = (r: unknown, re: RegExp) => {
    assert.ok(r instanceof Error, `not refused: ${JSON.stringify(r)}`);
    assert.match(r.message, re);
    return r.message;
  };
  /** Edits staging's stored record of `name` as someone with write access to the backend would. */
  async function editRecord(name: string, edit: (doc: VerificationRecord) => void): Promise<void> {
    const key = recordKey("staging", name);
    const o = (await stagingStore.get(key))!;
    const doc = JSON.parse(o.body.toString()) as VerificationRecord;
    edit(doc);
    assert.ok(await stagingStore.putIfMatch(key, Buffer.from(JSON.stringify(doc, null, 2)), o.etag));
  }

  beforeEach(() => {
    t = stagedStacks("molt-trust-", { "lab-v1": {}, "lab-v2": {} });
    ({ dir, stagingStore, worlds } = t);
    ({ staging: stagingEnv, prod: prodEnv } = t.envs);
    worlds.staging = FakeWorld.cluster(3, "lab-v1", "staging");
    worlds.prod = FakeWorld.cluster(3, "lab-v1", "prod");
  });
  afterEach(() => t.close());

  describe("the forging scenario of issue 33", () => {
    it("refuses a never-soaked record whose soak.result was edited from running to passed", async () => {
      stagingConfig(release("r2", "lab-v2"), 30);
      assert.equal((await roll("staging")).summary.result, "succeeded");
      assert.equal((await readRecord(stagingStore, "staging", "r2"))?.record.soak.result, "running");
      await editRecord("r2", (d) => {
        d.soak.result = "passed";
        d.soak.passedAt = d.soak.lastHealthyAt;
      });
      prodConfig(undefined);
      const p = await promoteToProd();
      refusedWith(p.r, /promotion of r2 refused: .*altered after it was written/);
      assert.doesNotMatch(readFileSync(stackFile("prod"), "utf8"), /r2/, "prod's config was not written");

      prodConfig(release("r2", "lab-v2"));
      await assert.rejects(roll("prod"), /altered after it was written/);
      assert.deepEqual(worlds.prod.log, [], "prod's cluster was not touched");
    });

    it("a rollout replaces a forged record in staging's backend; verify refuses to continue it", async () => {
      stagingConfig(release("r2", "lab-v2"), 30);
      assert.equal((await roll("staging")).summary.result, "succeeded");
      // Forged and resealed (the digest recomputed): intact, but a 30 min soak that "passed" at once.
      await editRecord("r2", (r) => {
        r.soak.result = "passed";
        r.soak.passedAt = r.soak.lastHealthyAt;
        r.soak.observations = 2;
        r.recordDigest = recordDigestOf(r);
      });
      await assert.rejects(verifyStaging(), /does not hold together \(its soak passed 0\.00 min after it started/);
      const again = await roll("staging");
      assert.equal(again.summary.result, "noop");
      const v = again.events.find((e) => e.type === "verification");
      assert.match(JSON.stringify(v), /"state":"soaking".*the record there was replaced: .*does not hold together/);
      assert.equal((await readRecord(stagingStore, "staging", "r2"))?.record.soak.result, "running");
    });

    it("refuses a verified record whose converged.nodes[0].image was edited", async () => {
      stagingConfig(release("r2", "lab-v2"));
      assert.equal((await roll("staging", { verify: true })).summary.result, "succeeded");
      await editRecord("r2", (d) => (d.converged.nodes[0].image = "lab-v0"));
      prodConfig(release("r2", "lab-v2"));
      await assert.rejects(roll("prod"), /altered after it was written/);
      refusedWith((await promoteToProd()).r, /altered after it was written/);
      assert.deepEqual(worlds.prod.log, []);
    });
  });

  describe("what promote says", () => {
    it("says what staging's cluster runs, not what its config names, when they differ", async () => {
      stagingConfig(release("r1", "lab-v1"));
      assert.equal((await roll("staging", { verify: true })).summary.result, "noop");
      // The cluster moved on (another image rolled by hand) after r1 was verified.
      for (const n of worlds.staging.list) n.image = "lab-v2";
      prodConfig(undefined);
      const { r, events } = await promoteToProd();
      const m = refusedWith(r, /stack staging is not healthy on it now/);
      assert.match(m, /staging's cluster runs lab-v2 on 3 nodes/);
      const claims = events.filter((e) => e.type === "promote-check").map((e) => (e as { detail: string }).detail);
      assert.ok(!claims.some((c) => /staging runs|runs r1/.test(c)), `a check claimed the cluster: ${claims}`);
    });

    it("says the cluster runs nothing when staging has no nodes", async () => {
      stagingConfig(release("r1", "lab-v1"));
      assert.equal((await roll("staging", { verify: true })).summary.result, "noop");
      worlds.staging.list = [];
      prodConfig(undefined);
      const { r, events } = await promoteToProd();
      refusedWith(r, /staging's cluster runs nothing: it has no nodes/);
      assert.ok(!events.some((e) => e.type === "promote-check" && /runs/.test(e.detail)));
    });

    it("names molt:promotion.requireVerifiedOn, not PULUMI_BACKEND_URL, for a backend it cannot read", async () => {
      stagingConfig(release("r1", "lab-v1"));
      const missing = `file://${join(dir, "no-such-backend")}`;
      prodConfig(release("r1", "lab-v1"), { backend: missing });
      for (const err of [await roll("prod").catch((e: Error) => e), (await promoteToProd()).r as Error]) {
        const m = refusedWith(err, /no-such-backend/);
        assert.match(m, /molt:promotion\.requireVerifiedOn/);
        assert.match(m, /Pulumi\.prod\.yaml/);
        assert.doesNotMatch(m, /PULUMI_BACKEND_URL|cannot open the Pulumi backend/);
        assert.equal(m.match(/nothing was changed/g)?.length, 1, m);
      }
    });

    it("reads records without writing to the backend they come from", async () => {
      stagingConfig(release("r1", "lab-v1"));
      const fresh = join(dir, "fresh-backend");
      mkdirSync(fresh);
      prodConfig(release("r1", "lab-v1"), { backend: `file://${fresh}` });
      refusedWith(await roll("prod").catch((e: Error) => e), /has no verification record/);
      refusedWith((await promoteToProd()).r, /has no verification record/);
      assert.equal(existsSync(join(fresh, ".molt")), false, "a read created .molt in the source backend");
    });

    it("checks --to as a stack name", async () => {
      stagingConfig(release("r1", "lab-v1"));
      const { r } = await promoteToProd({ to: "../prod" });
      refusedWith(r, /--to \.\.\/prod is not a stack name/);
      assert.ok(r instanceof PromotionRefusedError);
    });

    it("reports a bad --from as --from, not --stack", async () => {
      prodConfig(undefined);
      const m = refusedWith((await promoteToProd({ from: "../x" })).r, /--from \.\.\/x is not a stack name/);
      assert.doesNotMatch(m, /--stack/);
    });
  });

  describe("signed records", () => {
    it("staging signs its record when the soak passes; prod, trusting that key, accepts it", async () => {
      const key = keyPair("staging");
      stagingConfig(release("r2", "lab-v2"));
      assert.equal((await roll("staging")).summary.result, "succeeded");
      const v = await verifyStaging(key.file);
      assert.equal(v.result, "verified", v.reason);
      assert.match(v.reason, new RegExp(`signed with key ${escape(key.keyId)}`));
      const rec = (await readRecord(stagingStore, "staging", "r2"))!.record;
      assert.equal(rec.signature?.keyId, key.keyId);

      prodConfig(undefined, { publicKey: key.publicKey });
      const p = await promoteToProd();
      assert.ok(!(p.r instanceof Error), String(p.r));
      const verified = p.events.find((e) => e.type === "promote-check" && e.check === "verified");
      assert.match(JSON.stringify(verified), /signed with the trusted key SHA256:/);
      assert.deepEqual(
        p.events.filter((e) => e.type === "warning"),
        [],
      );

      const { summary, events } = await roll("prod");
      assert.equal(summary.result, "succeeded", summary.reason);
      const check = events.find((e) => e.type === "release-check");
      assert.match(JSON.stringify(check), /"verified":true.*signed with the trusted key/);
      assert.ok(!events.some((e) => e.type === "warning"));
    });

    it("refuses an unsigned record where prod trusts a key: promote and prod's rollout", async () => {
      const key = keyPair("staging");
      stagingConfig(release("r2", "lab-v2"));
      assert.equal((await roll("staging", { verify: true })).summary.result, "succeeded");
      prodConfig(undefined, { publicKey: key.publicKey });
      refusedWith((await promoteToProd()).r, /is not signed, and records of staging are trusted only when signed/);
      prodConfig(release("r2", "lab-v2"), { publicKey: key.publicKey });
      await assert.rejects(roll("prod"), /is not signed, and records of staging are trusted only when signed/);
      assert.deepEqual(worlds.prod.log, []);
    });

    it("refuses a never-soaked record forged into a consistent 'passed' one and signed with another key", async () => {
      const key = keyPair("staging");
      const forger = keyPair("forger");
      stagingConfig(release("r2", "lab-v2"), 30);
      assert.equal((await roll("staging")).summary.result, "succeeded");
      // Someone with write access to staging's backend, who knows molt's record format, writes a
      // record that holds together in every field, reseals its digest and signs it with their key.
      await editRecord("r2", (r) => {
        const start = Date.parse(r.converged.at);
        r.soak.lastHealthyAt = r.soak.passedAt = new Date(start + 30 * 60_000).toISOString();
        r.soak.result = "passed";
        r.soak.observations = 40;
        delete r.signature;
        r.recordDigest = recordDigestOf(r);
        const s = loadSigner({ file: forger.file, env: {} })!;
        r.signature = { algorithm: "ed25519", keyId: s.keyId, value: s.sign(recordBytes(r)) };
      });
      prodConfig(release("r2", "lab-v2"), { publicKey: key.publicKey });
      await assert.rejects(roll("prod"), new RegExp(`signed with another key \\(${escape(forger.keyId)}`));
      prodConfig(undefined, { publicKey: key.publicKey });
      refusedWith((await promoteToProd()).r, /signed with another key/);
      assert.deepEqual(worlds.prod.log, []);

      // Without a trusted key nothing tells that forgery from a real record: it is accepted,
      // and the warning says why.
      prodConfig(undefined);
      const p = await promoteToProd();
      assert.ok(!(p.r instanceof Error), String(p.r));
      assert.match(
        JSON.stringify(p.events.filter((e) => e.type === "warning")),
        /signed with key SHA256:.*no publicKey is configured for staging/,
      );
    });

    it("accepts an unsigned record where no key is trusted, with a warning: promote and prod's rollout", async () => {
      stagingConfig(release("r2", "lab-v2"));
      const staging = await roll("staging", { verify: true });
      assert.match(
        JSON.stringify(staging.events.filter((e) => e.type === "warning")),
        /is not signed \(no --signing-key/,
      );
      prodConfig(undefined);
      const p = await promoteToProd();
      assert.ok(!(p.r instanceof Error), String(p.r));
      assert.match(
        JSON.stringify(p.events),
        /"type":"warning","message":"the record of r2 on stack staging is not signed/,
      );
      const { summary, events } = await roll("prod");
      assert.equal(summary.result, "succeeded", summary.reason);
      assert.ok(events.some((e) => e.type === "warning" && /is not signed and no publicKey/.test(e.message)));
    });

    it("verify with a key soaks again a record that passed unsigned, then signs it; a rerun keeps it", async () => {
      const key = keyPair("staging");
      stagingConfig(release("r2", "lab-v2"));
      assert.equal((await roll("staging", { verify: true })).summary.result, "succeeded");
      assert.equal((await readRecord(stagingStore, "staging", "r2"))!.record.signature, undefined);
      const again = await verifyStaging(key.file);
      assert.equal(again.result, "verified", "soaked again, not already-verified");
      assert.equal((await readRecord(stagingStore, "staging", "r2"))!.record.signature?.keyId, key.keyId);
      assert.equal((await verifyStaging(key.file)).result, "already-verified");
      // Another key does not take a record over without watching the cluster itself.
      const other = keyPair("other");
      assert.equal((await verifyStaging(other.file)).result, "verified");
      assert.equal((await readRecord(stagingStore, "staging", "r2"))!.record.signature?.keyId, other.keyId);
    });

    it("rollout --verify signs with the key in MOLT_SIGNING_KEY_FILE", async () => {
      const key = keyPair("staging");
      stagingConfig(release("r2", "lab-v2"));
      stagingEnv.MOLT_SIGNING_KEY_FILE = key.file;
      assert.equal((await roll("staging", { verify: true })).summary.result, "succeeded");
      assert.equal((await readRecord(stagingStore, "staging", "r2"))!.record.signature?.keyId, key.keyId);
    });

    it("refuses a signing key without --verify, and a key that cannot sign, before anything changes", async () => {
      stagingConfig(release("r2", "lab-v2"));
      const key = keyPair("staging");
      await assert.rejects(
        rollout({ stack: "staging", workDir: dir, env: stagingEnv, edges, signingKeyFile: key.file }),
        (e: Error) =>
          e instanceof SigningKeyError &&
          /--signing-key signs the record of a soak: give it with --verify/.test(e.message),
      );
      await assert.rejects(
        rollout({
          stack: "staging",
          workDir: dir,
          env: stagingEnv,
          edges,
          verify: true,
          signingKeyFile: join(dir, "nope.pem"),
        }),
        (e: Error) => e instanceof SigningKeyError && /nope\.pem \(--signing-key\) does not exist/.test(e.message),
      );
      assert.deepEqual(worlds.staging.log, [], "the cluster was not touched");
      assert.equal(await readRecord(stagingStore, "staging", "r2"), undefined);

      assert.equal((await roll("staging")).summary.result, "succeeded");
      const before = await stagingStore.get(recordKey("staging", "r2"));
      await assert.rejects(verifyStaging(join(dir, "nope.pem")), SigningKeyError);
      assert.equal((await stagingStore.get(recordKey("staging", "r2")))?.etag, before?.etag, "the record is as it was");
    });
  });

  describe("soak length", () => {
    it("refuses a record that soaked less than staging's config now asks for; verify soaks it again", async () => {
      stagingConfig(release("r2", "lab-v2"), 0);
      assert.equal((await roll("staging", { verify: true })).summary.result, "succeeded");
      stagingConfig(release("r2", "lab-v2"), 0.002);
      prodConfig(undefined);
      refusedWith((await promoteToProd()).r, /soaked 0 min on stack staging, but staging's config asks for 0\.002/);
      const v = await verifyStaging();
      assert.equal(v.result, "verified", v.reason);
      assert.equal((await readRecord(stagingStore, "staging", "r2"))!.record.soak.minutes, 0.002);
      assert.ok(!((await promoteToProd()).r instanceof Error));
    });
  });
});
