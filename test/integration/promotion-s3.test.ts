// Verification records in an S3 bucket (molt-s3 on loopback) read by a stack whose own backend
// is a folder: staging's records live in staging's bucket, prod names that bucket in
// molt:promotion.requireVerifiedOn. The clusters are fakes (test/support/fake-edges.ts); the
// stores, the conditional writes and the lease are real.
import * as assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { S3Store } from "../../orchestrator/backend/s3";
import type { EdgeFactory } from "../../orchestrator/edges/open";
import { PromotionRefusedError } from "../../orchestrator/promotion/errors";
import { readRecord, recordKey } from "../../orchestrator/promotion/record";
import { verify } from "../../orchestrator/promotion/verify";
import { rollout } from "../../orchestrator/rollout";
import { fakeEdges, FakeWorld } from "../support/fake-edges";
import { startS3Server, type S3Server } from "../support/s3";

describe("verification records in an S3 bucket (molt-s3 on loopback, fake clusters)", function () {
  this.timeout(60_000);
  let s3: S3Server;
  let dir: string;
  let stagingUrl: string;
  const worlds: Record<string, FakeWorld> = {};
  const edges: EdgeFactory = async (o) => fakeEdges(worlds[o.stackName])(o);
  const saved: Record<string, string | undefined> = {};
  const release = { name: "os-2026-12", images: { staging: "lab-v2", prod: "lab-v2" } };

  const writeStack = (stack: string, extra: Record<string, unknown>) =>
    writeFileSync(
      join(dir, "stacks", `Pulumi.${stack}.yaml`),
      stringify({
        config: {
          "molt:provider": "lab",
          "molt:replicas": 3,
          "molt:image": "lab-v2",
          "molt:timeouts": { settleSeconds: 1 },
          "molt:lab": { name: stack, root: join(dir, "lab") },
          "molt:release": release,
          ...extra,
        },
      }),
    );
  const roll = (stack: string, env: Record<string, string>) =>
    rollout({
      stack,
      workDir: dir,
      env,
      edges,
      pollMs: 1,
      now: (() => {
        let t = Date.now();
        return () => (t += 1000);
      })(),
    });
  const prodEnv = () => ({ PULUMI_BACKEND_URL: `file://${join(dir, "prod-backend")}` });
  const requireOn = (backend: string) => ({ "molt:promotion": { requireVerifiedOn: [{ stack: "staging", backend }] } });

  before(async () => {
    s3 = await startS3Server(["staging-state"]);
    for (const k of ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "MOLT_HOME"]) saved[k] = process.env[k];
    for (const [k, v] of Object.entries(s3.credentials)) process.env[k] = v;
    dir = mkdtempSync(join(tmpdir(), "molt-promotion-s3-"));
    mkdirSync(join(dir, "lab", "images", "lab-v2"), { recursive: true });
    writeFileSync(join(dir, "lab", "images", "lab-v2", "image.json"), JSON.stringify({ name: "lab-v2" }));
    mkdirSync(join(dir, "stacks"));
    mkdirSync(join(dir, "prod-backend"));
    process.env.MOLT_HOME = join(dir, "home");
    stagingUrl = s3.url("staging-state", "molt");
    worlds.staging = FakeWorld.cluster(3, "lab-v2", "staging");
    worlds.prod = FakeWorld.cluster(3, "lab-v1", "prod");
  });
  after(async () => {
    for (const [k, v] of Object.entries(saved))
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    await s3?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("records staging's convergence in its bucket and soaks it there (verify holds its lease there)", async () => {
    writeStack("staging", { "molt:promotion": { soakMinutes: 0 } });
    const env = { PULUMI_BACKEND_URL: stagingUrl };
    const s = await roll("staging", env);
    assert.equal(s.result, "noop", s.reason);
    const store = new S3Store(stagingUrl);
    assert.equal((await readRecord(store, "staging", release.name))?.record.soak.result, "running");
    const v = await verify({ stack: "staging", workDir: dir, env, edges, soakIntervalMs: 1 });
    assert.equal(v.result, "verified", v.reason);
    assert.equal((await readRecord(store, "staging", release.name))?.record.soak.result, "passed");
  });

  it("lets prod (a folder backend) roll once staging's bucket holds the record", async () => {
    writeStack("prod", requireOn(stagingUrl));
    const s = await roll("prod", prodEnv());
    assert.equal(s.result, "succeeded", s.reason);
    assert.deepEqual(
      worlds.prod.list.map((n) => n.image),
      ["lab-v2", "lab-v2", "lab-v2"],
    );
  });

  it("refuses prod when the record in the bucket was edited, and when the bucket cannot be read", async () => {
    const store = new S3Store(stagingUrl);
    const key = recordKey("staging", release.name);
    const o = (await store.get(key))!;
    const doc = JSON.parse(o.body.toString()) as { converged: { nodes: unknown[] }; release: typeof release };
    doc.release = { ...doc.release, images: { ...doc.release.images, prod: "lab-v9" } };
    assert.ok(await store.putIfMatch(key, Buffer.from(JSON.stringify(doc)), o.etag));
    await assert.rejects(roll("prod", prodEnv()), (e: Error) => {
      assert.ok(e instanceof PromotionRefusedError, e.message);
      assert.match(e.message, /staging \(s3:\/\/staging-state\/molt.*altered after it was written/s);
      return true;
    });
    writeStack("prod", requireOn(s3.url("no-such-bucket")));
    await assert.rejects(roll("prod", prodEnv()), (e: Error) => {
      assert.ok(e instanceof PromotionRefusedError, e.message);
      assert.match(e.message, /the records of stack staging cannot be read from s3:\/\/no-such-bucket/);
      return true;
    });
  });
});
