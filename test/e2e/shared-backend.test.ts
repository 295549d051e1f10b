// Issue #20 in CI: a stack whose state lives in an S3 bucket (molt-s3 on loopback, etcd-only
// lab images, lab t12), rolled by two "runners" with their own host names, work trees and
// homes. One rollout at a time across runners, crash-resume from the other runner once the
// dead run's lease expired (every chaos invariant held), and bad backends refused with exit
// 2, nothing changed and no lock left. `npm run chaos -- --only two-runners` runs the same
// scenario on its own lab (chaos/results/).
import * as assert from "node:assert/strict";
import { Chaos, formatTable, runnerWrap, type ScenarioResult } from "../../chaos/harness";
import { openStore } from "../../orchestrator/backend/store";
import { type ObjectStore } from "../../orchestrator/backend/object-store";
import { readLease } from "../../orchestrator/lease/bucket";
import { startCli, type CliRun } from "../support/cli";
import { labEndpoints } from "../support/probe";
import { testLab } from "../support/lab";
import { freePort, startS3Server, type S3Server } from "../support/s3";

describe("shared S3 backend: two runners, one stack (e2e, lab t12)", function () {
  let s3: S3Server;
  let chaos: Chaos;
  const rows: ScenarioResult[] = [];

  before(async function () {
    this.timeout(600_000);
    s3 = await startS3Server(["molt-state"]);
    chaos = new Chaos({ lab: testLab(12), stack: "shared", s3, lockSeconds: 15 });
    await chaos.create();
  });
  after(async function () {
    this.timeout(600_000);
    if (rows.length) console.log(formatTable(rows).replace(/^/gm, "    "));
    for (const n of rows.flatMap((r) => r.notes)) console.log(`    note: ${n}`);
    await chaos?.teardown();
    await s3?.stop();
  });

  it("refuses runner B while A rolls; resumes A's SIGKILLed run from B once its lease expired", async () => {
    const r = await chaos.twoRunnerKill();
    rows.push(r);
    const broken = r.invariants.filter((i) => !i.ok);
    assert.equal(broken.length, 0, broken.map((i) => `${i.name}: ${i.detail}`).join("\n"));
    // A round trip per 2 s of the scenario at least (a fixed count would not follow the run's length).
    const floor = Math.max(10, Math.floor(r.wallMs / 2000));
    assert.ok(r.probe.ok >= floor, `the probe really wrote through the scenario: ${r.probe.ok} writes, want ${floor}`);
  });

  describe("bad backends: exit 2, nothing changed, no lock left", () => {
    let store: ObjectStore;
    /** Every object in the bucket with its ETag, and the lab's machines. */
    const snapshot = async () => {
      const keys = (await store.list("")).sort();
      const objects = await Promise.all(keys.map(async (k) => `${k} ${(await store.get(k))?.etag}`));
      return JSON.stringify({ objects, machines: labEndpoints(chaos.lab).map((e) => e.name) });
    };
    before(() => {
      store = openStore(chaos.env.PULUMI_BACKEND_URL, chaos.env)!;
      chaos.setImage(chaos.other()); // a rollout would have work to do
    });
    after(() => chaos.setImage(chaos.current));

    const bad = async (name: string, env: Record<string, string | undefined>, message: RegExp) => {
      const before = await snapshot();
      const run: CliRun = await startCli(
        ["rollout", "--stack", "shared", "--yes", "--json"],
        { ...chaos.env, ...env } as Record<string, string>,
        undefined,
        runnerWrap("runner-a"),
      ).done;
      const err = run.events.find((e) => e.type === "error") as { message?: string } | undefined;
      assert.equal(run.code, 2, `${name}: exit ${run.code}: ${run.stdout.slice(-400)} ${run.stderr.slice(-400)}`);
      assert.match(String(err?.message), message, name);
      assert.doesNotMatch(
        run.stdout + run.stderr,
        new RegExp(s3.credentials.AWS_SECRET_ACCESS_KEY),
        "no secret printed",
      );
      assert.equal(await snapshot(), before, `${name}: the bucket and the lab are unchanged`);
      assert.equal(await readLease(store, "shared"), undefined, `${name}: no lease left`);
    };

    it("a bucket that does not exist", () =>
      bad(
        "no bucket",
        { PULUMI_BACKEND_URL: s3.url("no-such-bucket", "shared") },
        /backend s3:\/\/no-such-bucket.*the bucket no-such-bucket does not exist.*nothing was changed/,
      ));

    it("wrong credentials", () =>
      bad(
        "wrong secret",
        { AWS_SECRET_ACCESS_KEY: "not-the-secret-key" },
        /refused the credentials \((SignatureDoesNotMatch|Forbidden|HTTP 403)\).*check AWS_ACCESS_KEY_ID and AWS_SEC/,
      ));

    it("no passphrase (runner A's home has none either: molt never makes one up for a shared backend)", () =>
      bad(
        "no passphrase",
        { PULUMI_CONFIG_PASSPHRASE: undefined, PULUMI_CONFIG_PASSPHRASE_FILE: undefined },
        /no passphrase was given for the secrets of stack "shared".*every runner needs the same passphrase/,
      ));

    it("an endpoint nobody listens on", async () => {
      const port = await freePort();
      await bad(
        "no server",
        { PULUMI_BACKEND_URL: chaos.env.PULUMI_BACKEND_URL.replace(/127\.0\.0\.1:\d+/, `127.0.0.1:${port}`) },
        /cannot reach http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\); check the endpoint/,
      );
    });
  });
});
