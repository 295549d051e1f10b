// Staging across environments with fake edges (test/support/fake-edges.ts) and a real file
// backend: a converged rollout records its release, verify soaks it, promote writes it into
// prod's config, prod's rollout checks staging's record first. The same flow runs on the lab
// in test/e2e/staging.test.ts.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { parse } from "yaml";
import { FileStore } from "../../orchestrator/backend/file";
import type { EdgeFactory } from "../../orchestrator/edges/open";
import { inspect } from "../../orchestrator/inspect";
import { PromotionNotConfirmedError, PromotionRefusedError } from "../../orchestrator/promotion/errors";
import type { PromoteEvent, VerifyEvent } from "../../orchestrator/promotion/events";
import { promote } from "../../orchestrator/promotion/promote";
import { readRecord, recordKey } from "../../orchestrator/promotion/record";
import type { Release } from "../../orchestrator/promotion/release";
import { verify } from "../../orchestrator/promotion/verify";
import { rollout } from "../../orchestrator/rollout";
import { FakeWorld } from "../support/fake-edges";
import { stagedStacks, type StagedStacks } from "../support/staged-stacks";

describe("staging across environments (fake edges, file backends)", function () {
  let t: StagedStacks;
  let dir: string;
  let stagingEnv: Record<string, string>;
  let prodEnv: Record<string, string>;
  let stagingStore: FileStore;
  let worlds: StagedStacks["worlds"];
  const edges: EdgeFactory = (o) => t.edges(o);

  const release = (name: string, image: string, prodImage = image): Release => ({
    name,
    images: { staging: image, prod: prodImage },
  });
  const stackFile = (stack: string) => t.stackFile(stack);
  const writeStack = (stack: string, image: string, extra: Record<string, unknown> = {}) =>
    t.writeStack(stack, image, extra);
  const stagingConfig = (r: Release) =>
    writeStack("staging", r.images.staging, { "molt:release": r, "molt:promotion": { soakMinutes: 0 } });
  const prodRequires = { "molt:promotion": { requireVerifiedOn: [{ stack: "staging", backend: "" }] } };

  const roll = (stack: string, o: { verify?: boolean } = {}) => t.roll(stack, o);
  async function verifyStaging() {
    const events: VerifyEvent[] = [];
    const s = await verify({
      stack: "staging",
      workDir: dir,
      env: stagingEnv,
      edges,
      soakIntervalMs: 1,
      onEvent: (e) => events.push(e),
    });
    return { s, events };
  }
  async function promoteToProd(confirm?: (diff: string) => Promise<boolean>) {
    const events: PromoteEvent[] = [];
    const r = await promote({
      from: "staging",
      to: "prod",
      workDir: dir,
      env: prodEnv,
      edges,
      onEvent: (e) => events.push(e),
      ...(confirm ? { confirm } : {}),
    });
    return { r, events };
  }
  const refusal = async (p: Promise<unknown>, cls: new (...a: never[]) => Error, re: RegExp) => {
    await assert.rejects(p, (e: Error) => {
      assert.ok(e instanceof cls, `${e.name}: ${e.message}`);
      assert.match(e.message, re);
      return true;
    });
  };

  before(() => {
    t = stagedStacks("molt-promotion-", { "lab-v1": {}, "lab-v2": {} }, { ticking: true });
    ({ dir, stagingStore, worlds } = t);
    // Two backends: prod reads staging's records from staging's backend.
    ({ staging: stagingEnv, prod: prodEnv } = t.envs);
    prodRequires["molt:promotion"].requireVerifiedOn[0].backend = stagingEnv.PULUMI_BACKEND_URL;
    worlds.staging = FakeWorld.cluster(3, "lab-v1", "staging");
    worlds.prod = FakeWorld.cluster(3, "lab-v1", "prod");
  });
  after(() => t.close());

  it("refuses prod's rollout when its config names no release but requires one verified on staging", async () => {
    writeStack("prod", "lab-v1", prodRequires);
    await refusal(roll("prod"), PromotionRefusedError, /names no molt:release.*molt promote --from staging --to prod/s);
    assert.equal(worlds.prod.log.length, 0, "nothing was changed");
  });

  it("records a converged rollout's release in staging's backend (soaking); verify soaks it to verified", async () => {
    stagingConfig(release("r2", "lab-v2"));
    const { summary, events } = await roll("staging");
    assert.equal(summary.result, "succeeded", summary.reason);
    const rec = events.find((e) => e.type === "verification");
    assert.ok(rec && rec.type === "verification" && rec.state === "soaking", JSON.stringify(rec));
    // The record comes before the summary, which stays the last event.
    assert.equal(events.at(-1)?.type, "summary");
    const stored = await readRecord(stagingStore, "staging", "r2");
    assert.equal(stored?.record.soak.result, "running");
    assert.equal(stored?.record.converged.operations, summary.operations);
    assert.deepEqual(
      stored?.record.converged.nodes.map((n) => n.image),
      ["lab-v2", "lab-v2", "lab-v2"],
    );

    const { s, events: ve } = await verifyStaging();
    assert.equal(s.result, "verified", s.reason);
    assert.ok(ve.filter((e) => e.type === "soak" && e.healthy).length >= 2, "observed repeatedly");
    assert.equal((await readRecord(stagingStore, "staging", "r2"))?.record.soak.result, "passed");
    // A rerun (noop) keeps the verified record rather than restarting the soak.
    const again = await roll("staging");
    assert.equal(again.summary.result, "noop");
    assert.ok(again.events.some((e) => e.type === "verification" && e.state === "kept"));
    assert.equal((await readRecord(stagingStore, "staging", "r2"))?.record.soak.result, "passed");
  });

  it("refuses prod's rollout to a release staging never verified, naming staging and what is missing", async () => {
    writeStack("prod", "lab-v2", { ...prodRequires, "molt:release": release("r2-typo", "lab-v2") });
    await refusal(
      roll("prod"),
      PromotionRefusedError,
      /requireVerifiedOn.*staging.*release r2-typo has no verification record on stack staging/s,
    );
    assert.equal(worlds.prod.log.length, 0, "nothing was changed");
  });

  it("promote asks with a diff and, when not confirmed, writes nothing", async () => {
    writeStack("prod", "lab-v1", prodRequires);
    const before = readFileSync(stackFile("prod"), "utf8");
    let shown = "";
    await refusal(
      promoteToProd(async (d) => ((shown = d), false)),
      PromotionNotConfirmedError,
      /not confirmed/,
    );
    assert.match(shown, /^- {2}molt:image: lab-v1$/m);
    assert.match(shown, /^\+ {2}molt:image: lab-v2$/m);
    assert.equal(readFileSync(stackFile("prod"), "utf8"), before);
  });

  it("promotes staging's verified release into prod's config; prod then rolls to it", async () => {
    const { r, events } = await promoteToProd();
    assert.equal(r.written, true);
    assert.deepEqual(
      events.filter((e) => e.type === "promote-check").map((e) => (e as { check: string }).check),
      ["release", "verified", "healthy-now"],
    );
    const c = (parse(readFileSync(stackFile("prod"), "utf8")) as { config: Record<string, unknown> }).config;
    assert.equal(c["molt:image"], "lab-v2");
    assert.deepEqual(c["molt:release"], release("r2", "lab-v2"));
    assert.equal(worlds.prod.log.length, 0, "promote never touches prod's cluster");
    const { summary, events: re } = await roll("prod");
    assert.equal(summary.result, "succeeded", summary.reason);
    const check = re.find((e) => e.type === "release-check");
    assert.ok(check && check.type === "release-check" && check.sources[0].verified, JSON.stringify(check));
    assert.deepEqual(
      worlds.prod.list.map((n) => n.image),
      ["lab-v2", "lab-v2", "lab-v2"],
    );
    // A second promotion has nothing to change.
    assert.equal((await promoteToProd()).r.written, false);
  });

  it("refuses a tampered record: prod's rollout and promote both", async () => {
    const key = recordKey("staging", "r2");
    const o = (await stagingStore.get(key))!;
    const doc = JSON.parse(o.body.toString()) as { release: Release };
    doc.release.images.prod = "lab-v1";
    const tampered = await stagingStore.putIfMatch(key, Buffer.from(JSON.stringify(doc)), o.etag);
    assert.ok(tampered);
    try {
      await refusal(roll("prod"), PromotionRefusedError, /altered after it was written/);
      await refusal(promoteToProd(), PromotionRefusedError, /altered after it was written/);
    } finally {
      const now = (await stagingStore.get(key))!;
      await stagingStore.putIfMatch(key, o.body, now.etag);
    }
  });

  it("a staging that breaks during the soak leaves no record, and its release cannot be promoted", async () => {
    stagingConfig(release("r3", "lab-v2"));
    const { summary } = await roll("staging");
    assert.equal(summary.result, "noop");
    assert.equal((await readRecord(stagingStore, "staging", "r3"))?.record.soak.result, "running");
    await refusal(promoteToProd(), PromotionRefusedError, /soak .* has not finished/);
    worlds.staging.machines.get(worlds.staging.list[1].name)!.up = false;
    try {
      const { s, events } = await verifyStaging();
      assert.equal(s.result, "soak-failed");
      assert.match(s.reason, /did not stay healthy.*not a healthy voter: staging-cp-5/);
      assert.ok(events.some((e) => e.type === "verification" && e.state === "removed"));
      assert.equal(await readRecord(stagingStore, "staging", "r3"), undefined, "no record is left");
      await refusal(promoteToProd(), PromotionRefusedError, /has no verification record/);
      await refusal(verifyStaging(), PromotionRefusedError, /has not converged on stack staging/);
    } finally {
      worlds.staging.machines.get(worlds.staging.list[1].name)!.up = true;
    }
  });

  it("rollout --verify soaks inline: converged and verified in one run", async () => {
    const { summary, events } = await roll("staging", { verify: true });
    assert.equal(summary.result, "noop", summary.reason);
    assert.ok(events.some((e) => e.type === "verification" && e.state === "verified"));
    assert.equal((await readRecord(stagingStore, "staging", "r3"))?.record.soak.result, "passed");
  });

  it("refuses rollout --verify on a stack without a release, before anything", async () => {
    writeStack("plain", "lab-v1");
    worlds.plain = FakeWorld.cluster(3, "lab-v1", "plain");
    await refusal(
      roll("plain", { verify: true }),
      PromotionRefusedError,
      /--verify: stack plain names no molt:release/,
    );
    assert.equal(worlds.plain.log.length, 0);
  });

  it("refuses a promotion whose release has no image for the target", async () => {
    stagingConfig({ name: "r4", images: { staging: "lab-v2" } });
    await refusal(promoteToProd(), PromotionRefusedError, /names no image for stack prod/);
  });

  it("chains dev -> staging -> prod: each stack requires the one before it", async () => {
    const r5: Release = { name: "r5", images: { dev: "lab-v1", staging: "lab-v1", prod: "lab-v1" } };
    worlds.dev = FakeWorld.cluster(3, "lab-v2", "dev");
    writeStack("dev", "lab-v1", { "molt:release": r5, "molt:promotion": { soakMinutes: 0 } });
    const devEnv = stagingEnv; // dev and staging share a backend here; prod has its own
    const dev = await rollout({ stack: "dev", workDir: dir, env: devEnv, edges, pollMs: 1, verify: true });
    assert.equal(dev.result, "succeeded", dev.reason);
    // staging requires dev: its rollout is refused until r5 is promoted into its config.
    writeStack("staging", "lab-v2", {
      "molt:release": release("r3", "lab-v2"),
      "molt:promotion": { soakMinutes: 0, requireVerifiedOn: ["dev"] },
    });
    await refusal(roll("staging"), PromotionRefusedError, /release r3 has no verification record on stack dev/);
    await promote({ from: "dev", to: "staging", workDir: dir, env: stagingEnv, edges });
    assert.equal((await roll("staging", { verify: true })).summary.result, "succeeded");
    await promoteToProd();
    const { summary } = await roll("prod");
    assert.equal(summary.result, "succeeded", summary.reason);
    assert.deepEqual(
      worlds.prod.list.map((n) => n.image),
      ["lab-v1", "lab-v1", "lab-v1"],
    );
  });

  it("status shows the release and its verification", async () => {
    stagingConfig(release("r3", "lab-v2"));
    const i = await inspect({ stack: "staging", workDir: dir, env: stagingEnv, edges });
    assert.equal(i.release?.name, "r3");
    assert.equal(i.release?.verification.state, "verified");
    const p = await inspect({ stack: "prod", workDir: dir, env: prodEnv, edges });
    assert.deepEqual(p.release?.requireVerifiedOn, ["staging"]);
  });
});
