// Staging a chained upgrade (fake edges with their fake Kubernetes, real file backends): a
// release names its chain (molt:release.chain), staging's record says which steps its run saw
// converged, promote writes the chain into prod's molt:images, and prod's requireVerifiedOn
// holds for the chain's target.
import assert from "node:assert/strict";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";
import { FileStore } from "../../orchestrator/backend/file";
import type { EdgeFactory } from "../../orchestrator/edges/open";
import { InvalidConfigError } from "../../orchestrator/config";
import { promote } from "../../orchestrator/promotion/promote";
import { readRecord } from "../../orchestrator/promotion/record";
import type { Release } from "../../orchestrator/promotion/release";
import { inspect } from "../../orchestrator/inspect";
import { FakeWorld, withFakeKube } from "../support/fake-edges";
import { stagedStacks, type StagedStacks } from "../support/staged-stacks";

const IMAGES: Record<string, { k8s: string; etcd: string }> = {
  "k8s-v1.35.4": { k8s: "v1.35.4", etcd: "3.6.16" },
  "k8s-v1.36.3": { k8s: "v1.36.3", etcd: "3.6.16" },
  "k8s-v1.37.2": { k8s: "v1.37.2", etcd: "3.7.3" },
};
const RELEASE: Release = {
  name: "k8s-1.37.2-chain",
  kubernetesVersion: "1.37.2",
  images: { staging: "k8s-v1.37.2", prod: "k8s-v1.37.2" },
  chain: {
    "1.35": { images: { staging: "k8s-v1.35.4", prod: "k8s-v1.35.4" } },
    "1.36": { images: { staging: "k8s-v1.36.3", prod: "k8s-v1.36.3" } },
  },
};
const CHAIN = { "1.35": "k8s-v1.35.4", "1.36": "k8s-v1.36.3" };

describe("staging a chained upgrade (fake edges, file backends)", function () {
  let t: StagedStacks;
  let dir: string;
  let envs: StagedStacks["envs"];
  let worlds: StagedStacks["worlds"];
  const edges: EdgeFactory = (o) => t.edges(o);
  const stackFile = (stack: string) => t.stackFile(stack);
  const at135 = (stack: string) => withFakeKube(FakeWorld.cluster(3, "k8s-v1.35.4", stack), "1.35.4");

  const writeStack = (stack: string, image: string, extra: Record<string, unknown> = {}) =>
    t.writeStack(stack, image, extra);
  const stagingConfig = () =>
    writeStack("staging", "k8s-v1.37.2", {
      "molt:images": CHAIN,
      "molt:release": RELEASE,
      "molt:promotion": { soakMinutes: 0 },
    });

  const roll = (stack: string, o: { verify?: boolean } = {}) => t.roll(stack, o);
  const record = async () =>
    (await readRecord(new FileStore(join(dir, "staging-backend")), "staging", RELEASE.name))?.record;

  before(() => {
    const images = Object.entries(IMAGES).map(([name, v]) => [name, { kubernetesVersion: v.k8s, etcdVersion: v.etcd }]);
    t = stagedStacks("molt-chain-staging-", Object.fromEntries(images), { ticking: true });
    ({ dir, envs, worlds } = t);
  });
  after(() => t.close());

  it("a run killed inside the 1.36 step: the record does not vouch for the 1.35 step it did not see", async () => {
    stagingConfig();
    worlds.staging = at135("staging");
    worlds.staging.faults.crashAfterApply = 3;
    await assert.rejects(roll("staging"), /simulated crash/);
    const { summary } = await roll("staging");
    assert.equal(summary.result, "succeeded", summary.reason);
    assert.deepEqual((await record())?.converged.chain, [
      { minor: "1.35", image: "k8s-v1.35.4", verified: false },
      { minor: "1.36", image: "k8s-v1.36.3", verified: true, kubernetesVersion: "1.36.3" },
    ]);
  });

  it("a whole chain in one run: each step verified, the target soaked; the record says so", async () => {
    stagingConfig();
    // A record of the same release is kept by a rerun: this run writes its own.
    rmSync(join(dir, "staging-backend", ".molt", "verifications"), { recursive: true, force: true });
    worlds.staging = at135("staging");
    const { summary } = await roll("staging", { verify: true });
    assert.equal(summary.result, "succeeded", summary.reason);
    const r = await record();
    assert.deepEqual(r?.converged.chain, [
      { minor: "1.35", image: "k8s-v1.35.4", verified: true, kubernetesVersion: "1.35.4" },
      { minor: "1.36", image: "k8s-v1.36.3", verified: true, kubernetesVersion: "1.36.3" },
    ]);
    assert.equal(r?.soak.result, "passed");
    const i = await inspect({ stack: "staging", workDir: dir, env: envs.staging, edges });
    assert.match(i.release?.verification.detail ?? "", /chain steps 1\.35\.4 verified, 1\.36\.3 verified/);
  });

  it("prod requires staging's record of the chain's target: refused before any change for another target", async () => {
    worlds.prod = at135("prod");
    const other: Release = { ...RELEASE, name: "k8s-1.37.2-unverified" };
    writeStack("prod", "k8s-v1.37.2", {
      "molt:images": CHAIN,
      "molt:release": other,
      "molt:promotion": { requireVerifiedOn: [{ stack: "staging", backend: envs.staging.PULUMI_BACKEND_URL }] },
    });
    await assert.rejects(roll("prod"), /k8s-1\.37\.2-unverified.*staging|staging.*k8s-1\.37\.2-unverified/s);
    assert.deepEqual(worlds.prod.log, [], "nothing ran on prod");
  });

  it("promote writes the release's chain into prod's molt:images; prod then walks it", async () => {
    writeStack("prod", "k8s-v1.35.4", {
      "molt:promotion": { requireVerifiedOn: [{ stack: "staging", backend: envs.staging.PULUMI_BACKEND_URL }] },
    });
    const r = await promote({ from: "staging", to: "prod", workDir: dir, env: envs.prod, edges });
    assert.equal(r.written, true);
    const c = (parse(readFileSync(stackFile("prod"), "utf8")) as { config: Record<string, unknown> }).config;
    assert.equal(c["molt:image"], "k8s-v1.37.2");
    assert.deepEqual(c["molt:images"], CHAIN);
    assert.deepEqual(c["molt:release"], RELEASE);
    const { summary, events } = await roll("prod");
    assert.equal(summary.result, "succeeded", summary.reason);
    const check = events.find((e) => e.type === "release-check");
    assert.ok(check && check.type === "release-check" && check.sources[0].verified, JSON.stringify(check));
    assert.deepEqual(
      worlds.prod.list.map((n) => n.image),
      ["k8s-v1.37.2", "k8s-v1.37.2", "k8s-v1.37.2"],
    );
    assert.ok(worlds.prod.log.includes("kube addons 1.36.3"), "prod walked the 1.36 step");
  });

  describe("molt:release.chain: bad input", () => {
    const rows: [string, Record<string, unknown>, RegExp][] = [
      [
        "molt:images naming another image than the release's chain",
        { "molt:images": { ...CHAIN, "1.36": "k8s-v1.35.4" }, "molt:release": RELEASE },
        /molt:images\."1\.36": k8s-v1\.35\.4, but release k8s-1\.37\.2-chain's chain names k8s-v1\.36\.3/,
      ],
      [
        "a chain minor missing from molt:images",
        { "molt:images": { "1.36": "k8s-v1.36.3" }, "molt:release": RELEASE },
        /molt:images\."1\.35": missing, but release k8s-1\.37\.2-chain's chain names k8s-v1\.35\.4/,
      ],
      [
        "molt:images naming a minor the release's chain does not",
        { "molt:images": CHAIN, "molt:release": { ...RELEASE, chain: { "1.36": RELEASE.chain!["1.36"] } } },
        /molt:images\."1\.35": release k8s-1\.37\.2-chain's chain names no 1\.35 image for stack staging/,
      ],
      [
        "a chain key that is not a minor",
        { "molt:images": CHAIN, "molt:release": { ...RELEASE, chain: { "1.36.3": RELEASE.chain!["1.36"] } } },
        /molt:release\.chain\.1\.36\.3: the chain's steps per Kubernetes minor, such as \{ "1\.36"/,
      ],
      [
        "a chain step without images",
        { "molt:images": CHAIN, "molt:release": { ...RELEASE, chain: { "1.36": { kubernetesVersion: "1.36.3" } } } },
        /molt:release\.chain\.1\.36\.images/,
      ],
      [
        "a chain step version that is not a version",
        {
          "molt:images": CHAIN,
          "molt:release": {
            ...RELEASE,
            chain: { ...RELEASE.chain, "1.36": { ...RELEASE.chain!["1.36"], kubernetesVersion: "1.36" } },
          },
        },
        /molt:release\.chain\.1\.36\.kubernetesVersion: a full Kubernetes version/,
      ],
      [
        "an empty chain",
        { "molt:images": CHAIN, "molt:release": { ...RELEASE, chain: {} } },
        /molt:release\.chain: at least one minor/,
      ],
    ];
    for (const [what, extra, message] of rows)
      it(`refuses ${what}`, async () => {
        writeStack("staging", "k8s-v1.37.2", extra);
        worlds.staging = at135("staging");
        await assert.rejects(roll("staging"), (e: unknown) => {
          assert.ok(e instanceof InvalidConfigError, String(e));
          assert.match(e.message, message);
          return true;
        });
        assert.deepEqual(worlds.staging.log, []);
      });
  });
});
