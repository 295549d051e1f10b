// The chaos harness's CI subset (chaos/harness.ts; `npm run chaos` runs every scenario):
// SIGKILL at 8 step boundaries of one rollout, a bootstrap whose SSH never comes up, and a
// backend that turns read-only during `up`. Every scenario must keep every invariant.
// `npm run test:long` adds a bootstrap that never starts etcd (rollout.test.ts rolls back such
// a node in npm test) and an old member dying mid-rollout with its recovery through
// --replace-dead (vip.test.ts replaces a dead machine with --replace-dead in npm test); they
// left npm test for CI's time budget (test/support/long.ts).
import * as assert from "node:assert/strict";
import { Chaos, CI_KILL_POINTS, formatTable, KILL_POINTS, type ScenarioResult } from "../../chaos/harness";
import { testLab } from "../support/lab";
import { longOnly } from "../support/long";

describe("chaos on the lab (e2e, CI subset)", function () {
  let chaos: Chaos;
  const rows: ScenarioResult[] = [];
  const expectHeld = (r: ScenarioResult) => {
    rows.push(r);
    const broken = r.invariants.filter((i) => !i.ok);
    assert.equal(broken.length, 0, broken.map((i) => `${i.name}: ${i.detail}`).join("\n"));
    assert.ok(r.faults.length > 0, "the fault was injected");
    // A round trip per 2 s of the scenario at least (a fixed count would not follow the run's length).
    const floor = Math.max(10, Math.floor(r.wallMs / 2000));
    assert.ok(r.probe.ok >= floor, `the probe really wrote through the scenario: ${r.probe.ok} writes, want ${floor}`);
  };

  before(async function () {
    this.timeout(600_000);
    chaos = new Chaos({ lab: testLab(6) });
    await chaos.create();
  });
  // A scenario that times out never returns its trace: where each of its runs stood.
  afterEach(function () {
    if (this.currentTest?.state === "failed" && chaos)
      for (const line of chaos.traceSoFar()) console.log(`      ${line}`);
  });
  after(async function () {
    this.timeout(600_000);
    if (rows.length) console.log(formatTable(rows).replace(/^/gm, "    "));
    await chaos?.teardown();
  });

  it(`converges after SIGKILL at ${CI_KILL_POINTS.length} step boundaries of one rollout`, async () => {
    const r = await chaos.killChain(KILL_POINTS.filter((p) => CI_KILL_POINTS.includes(p.id)));
    expectHeld(r);
    assert.equal(r.faults.length, CI_KILL_POINTS.length, `every kill point was hit: ${r.faults.join("; ")}`);
  });

  longOnly(() =>
    it("rolls back a new node whose etcd never starts", async () =>
      expectHeld(await chaos.bootstrapFails("lab-broken", "etcd never starts"))),
  );

  it("rolls back a new node whose SSH never comes up", async () =>
    expectHeld(await chaos.bootstrapFails("lab-nossh", "SSH never comes up")));

  longOnly(() =>
    it("stops when an old member dies mid-rollout, and recovers through --replace-dead", async () =>
      expectHeld(await chaos.oldMemberDies())),
  );

  it("survives the backend turning read-only during `up`", async () => expectHeld(await chaos.backendUnwritable()));
});
