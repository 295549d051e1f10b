// Chained upgrades through the rollout loop with fake edges (test/support/fake-edges.ts, with
// its fake Kubernetes): a 1.35 cluster reaches 1.37 in one run, one minor at a time, every
// gate of the 1.36 step holding before 1.37's first change, and a run killed after any of
// its changes resumes at the step the world is in.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import { rollout, type Summary } from "../../orchestrator/rollout";
import { inspect } from "../../orchestrator/inspect";
import { InvalidConfigError } from "../../orchestrator/config";
import { fakeEdges, FakeWorld, withFakeKube } from "../support/fake-edges";
import { fakeProject, tickingClock, writeLabStack, type FakeProject } from "../support/fake-project";
import { printInspection } from "../../orchestrator/cli/render";

/** What `f` writes to stdout. */
function printed(f: () => void): string {
  const chunks: string[] = [];
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((c: string) => (chunks.push(String(c)), true)) as typeof process.stdout.write;
  try {
    f();
  } finally {
    process.stdout.write = write;
  }
  return chunks.join("");
}

const IMAGES: Record<string, { k8s: string; etcd: string }> = {
  "k8s-v1.35.4": { k8s: "v1.35.4", etcd: "3.6.16" },
  "k8s-v1.36.3": { k8s: "v1.36.3", etcd: "3.6.16" },
  "k8s-v1.37.2": { k8s: "v1.37.2", etcd: "3.7.3" },
  "etcd-v3.6.16": { k8s: "", etcd: "3.6.16" },
  "k8s-v1.38.0": { k8s: "v1.38.0", etcd: "3.8.0" },
};

describe("chained upgrades through the loop (fake edges)", function () {
  let project: FakeProject;
  let dir: string;
  let env: Record<string, string>;

  before(() => {
    const images = Object.entries(IMAGES).map(([name, v]) => [
      name,
      { ...(v.k8s ? { kubernetesVersion: v.k8s } : {}), etcdVersion: v.etcd },
    ]);
    project = fakeProject("molt-chain-", Object.fromEntries(images));
    ({ dir } = project);
    env = project.envs.backend;
  });
  after(() => project.close());

  const stack = (images: Record<string, unknown> | undefined, more: Record<string, unknown> = {}) =>
    writeLabStack(dir, "chain", {
      "molt:replicas": 3,
      "molt:image": "k8s-v1.37.2",
      ...(images ? { "molt:images": images } : {}),
      "molt:timeouts": { settleSeconds: 1 },
      ...more,
    });
  const CHAIN = { "1.35": "k8s-v1.35.4", "1.36": "k8s-v1.36.3" };

  async function run(w: FakeWorld): Promise<Summary> {
    return rollout({
      stack: "lab",
      workDir: dir,
      env,
      edges: fakeEdges(w),
      pollMs: 1,
      now: tickingClock(),
    });
  }

  /** A 3-node cluster on Kubernetes 1.35.4 (its image), kubeadm-config and kube-proxy at it. */
  const cluster135 = () => withFakeKube(FakeWorld.cluster(3, "k8s-v1.35.4"), "1.35.4");
  const images = (w: FakeWorld) => w.list.map((n) => `${n.name}:${n.image}`);

  it("rolls 1.35 -> 1.36 -> 1.37 in one run; 1.36 converges (addons) before 1.37's first change", async () => {
    stack(CHAIN);
    const w = cluster135();
    const summary = await run(w);
    assert.equal(summary.result, "succeeded", summary.reason);
    assert.deepEqual(images(w), ["lab-cp-7:k8s-v1.37.2", "lab-cp-8:k8s-v1.37.2", "lab-cp-9:k8s-v1.37.2"]);
    const changes = w.log.filter(
      (l) => l.startsWith("up ") || l.startsWith("kube kubeadm") || l.startsWith("kube addons"),
    );
    assert.deepEqual(changes, [
      "kube kubeadm-config 1.36.3",
      "up surge lab-cp-4",
      "up prune lab-cp-1",
      "up surge lab-cp-5",
      "up prune lab-cp-2",
      "up surge lab-cp-6",
      "up prune lab-cp-3",
      "kube addons 1.36.3",
      "kube kubeadm-config 1.37.2",
      "up surge lab-cp-7",
      "up prune lab-cp-4",
      "up surge lab-cp-8",
      "up prune lab-cp-5",
      "up surge lab-cp-9",
      "up prune lab-cp-6",
      "kube addons 1.37.2",
    ]);
    assert.equal(w.kube!.kubeProxy.version, "1.37.2");
    assert.equal(w.members.length, 3);
    // Re-run: converged, nothing to do.
    assert.equal((await run(w)).result, "noop");
  });

  it("the next etcd minor joins only once etcd's leader has raised the cluster version", async () => {
    // 1.36 (etcd 3.6) -> 1.37 (3.7) -> 1.38 (3.8): a 3.8 member refuses to start while the cluster
    // version reads 3.6 (the fake's joinRefusal, etcd's MinClusterVersion), and the leader raises
    // it only some reads after the last 3.6 member left.
    stack({ "1.36": "k8s-v1.36.3", "1.37": "k8s-v1.37.2" }, { "molt:image": "k8s-v1.38.0" });
    const w = withFakeKube(FakeWorld.cluster(3, "k8s-v1.36.3"), "1.36.3");
    w.etcdVersionOf = (image) => IMAGES[image]?.etcd;
    w.clusterVersion = "3.6.0";
    const decisions: { kind: string; key?: string; reason: string }[] = [];
    const summary = await rollout({
      stack: "lab",
      workDir: dir,
      env,
      edges: fakeEdges(w),
      pollMs: 1,
      now: tickingClock(),
      onEvent: (e) => {
        if (e.type === "decision") decisions.push(e.operation as (typeof decisions)[number]);
        // The leader lags each raise by a few reads: a removal of the last older member starts it.
        if (e.type === "decision" && (e.operation as { kind: string }).kind === "remove-member")
          w.clusterVersionLagReads = 4;
      },
    });
    assert.equal(summary.result, "succeeded", `${summary.reason}\n${w.log.join("\n")}`);
    assert.deepEqual(images(w), ["lab-cp-7:k8s-v1.38.0", "lab-cp-8:k8s-v1.38.0", "lab-cp-9:k8s-v1.38.0"]);
    assert.ok(!w.log.some((l) => /more than one minor below this member/.test(l)), w.log.join("\n"));
    const waits = decisions.filter((d) => d.kind === "wait" && d.key === "etcd-cluster-version");
    assert.ok(waits.length > 0, "molt waited on the cluster version");
    assert.ok(
      waits.some((d) =>
        /step 1\/2 \(1\.37\.2\): etcd's cluster version is 3\.6\.0, every member runs 3\.7 /.test(d.reason),
      ),
      waits.map((d) => d.reason).join("\n"),
    );
    // 3.7 is the cluster version before 1.38's first change; 3.8 before the run calls itself done.
    const raised37 = w.log.indexOf("etcd cluster version 3.6.0 -> 3.7.0");
    const first138 = w.log.indexOf("kube kubeadm-config 1.38.0");
    assert.ok(raised37 >= 0 && raised37 < first138, w.log.join("\n"));
    assert.ok(w.log.includes("etcd cluster version 3.7.0 -> 3.8.0"), w.log.join("\n"));
    assert.equal(w.clusterVersion, "3.8.0");
  });

  it("resumes a run killed after any of its changes at the step the world is in", async function () {
    this.timeout(120_000);
    stack(CHAIN);
    // The engine runs of a whole run (12: six per step); crash 6 falls between the steps
    // (every node on 1.36, its addons not yet updated), 8 inside the second step.
    for (let crash = 1; crash <= 12; crash++) {
      const w = cluster135();
      w.faults.crashAfterApply = crash;
      await assert.rejects(run(w), /simulated crash/, `crash after change ${crash}`);
      const summary = await run(w);
      assert.ok(["succeeded", "noop"].includes(summary.result), `crash ${crash}: ${summary.reason}`);
      assert.deepEqual(
        w.list.map((n) => n.image),
        ["k8s-v1.37.2", "k8s-v1.37.2", "k8s-v1.37.2"],
        `crash after change ${crash}: ${w.log.join("\n")}`,
      );
      // Never a 1.37 node while a 1.35 node was still listed, never 1.37 before 1.36's addons.
      const addons136 = w.log.indexOf("kube addons 1.36.3");
      const first137 = w.log.findIndex((l) => l === "kube kubeadm-config 1.37.2");
      assert.ok(addons136 >= 0 && addons136 < first137, `crash ${crash}: ${w.log.join("\n")}`);
      assert.equal(w.kube!.kubeProxy.version, "1.37.2");
      assert.equal(w.members.length, 3);
      assert.equal(w.machines.size, 3);
    }
  });

  it("a cluster already between steps (every node on 1.36, kube-proxy still 1.35) finishes 1.36 first", async () => {
    stack(CHAIN);
    const w = withFakeKube(FakeWorld.cluster(3, "k8s-v1.36.3"), "1.36.3");
    w.kube!.kubeProxy = { version: "1.35.4", rolledOut: true };
    const summary = await run(w);
    assert.equal(summary.result, "succeeded", summary.reason);
    const first = w.log.findIndex((l) => l.startsWith("kube ") && !l.startsWith("kube cordon"));
    assert.equal(w.log[first], "kube addons 1.36.3", w.log.join("\n"));
    assert.deepEqual(images(w), ["lab-cp-4:k8s-v1.37.2", "lab-cp-5:k8s-v1.37.2", "lab-cp-6:k8s-v1.37.2"]);
  });

  it("a gap in molt:images is refused before any change, naming the missing minor", async () => {
    stack({ "1.35": "k8s-v1.35.4" });
    const w = cluster135();
    const summary = await run(w);
    assert.equal(summary.result, "refused", summary.reason);
    assert.match(summary.reason, /molt:images names no image for 1\.36/);
    assert.deepEqual(
      w.log.filter((l) => !l.startsWith("etcd snapshot") && !l.startsWith("etcd writeOwner")),
      [],
    );
  });

  it("`plan` and `status` show the chain: each step's version and image, where the cluster is", async () => {
    stack(CHAIN);
    const w = cluster135();
    const i = await inspect({ stack: "lab", workDir: dir, env, edges: fakeEdges(w) });
    assert.ok(i.chain, "the inspection has the chain");
    // etcd's cluster version, as its leader set it, beside the members' health.
    assert.equal(i.etcdClusterVersion, "3.6.0");
    assert.match(i.conditions.find((c) => c.type === "EtcdClusterHealthy")!.reason, /, cluster version 3\.6\.0$/);
    assert.deepEqual(
      i.chain!.steps.map((s) => [s.kubernetesVersion, s.image, s.state, s.replacements]),
      [
        ["1.35.4", "k8s-v1.35.4", "reached", 0],
        ["1.36.3", "k8s-v1.36.3", "next", 3],
        ["1.37.2", "k8s-v1.37.2", "pending", 3],
      ],
    );
    // The replacements listed are the first step's: to 1.36.3, not to the target.
    assert.deepEqual(
      i.replacements.map((r) => r.to),
      ["k8s-v1.36.3/k8s 1.36.3", "k8s-v1.36.3/k8s 1.36.3", "k8s-v1.36.3/k8s 1.36.3"],
    );
    const out = printed(() => printInspection(i, "plan"));
    assert.match(out, /chain 1\.35\.4 -> 1\.36\.3 -> 1\.37\.2 \(molt:images\).*step 2 of 3 \(1\.36\.3\) next/);
    assert.match(out, /\n {2}2\s+1\.36\.3\s+k8s-v1\.36\.3\s+3\.6\.16\s+0\s+3\s+next\n/);
    assert.match(out, /\n {2}3\s+1\.37\.2\s+k8s-v1\.37\.2\s+3\.7\.3\s+0\s+3\s+pending\n/);

    // Inside the first step: status says how far it is.
    stack(CHAIN);
    const mid = cluster135();
    mid.faults.crashAfterApply = 3;
    await assert.rejects(run(mid), /simulated crash/);
    const j = await inspect({ stack: "lab", workDir: dir, env, edges: fakeEdges(mid) });
    assert.match(
      printed(() => printInspection(j, "status")),
      /step 2 of 3 \(1\.36\.3\) rolling: 2 node\(s\) on it/,
    );
  });

  it("`status --json`: an unreadable cluster version is an error of its own, never in etcdClusterVersion", async () => {
    stack(CHAIN);
    const w = cluster135();
    w.faults.clusterVersionReadFails = true;
    const i = await inspect({ stack: "lab", workDir: dir, env, edges: fakeEdges(w) });
    assert.equal(i.etcdClusterVersion, undefined);
    assert.equal(i.etcdClusterVersionError, "etcd /version: no answer within 5000 ms");
    // The condition's line still says it in words.
    assert.match(
      i.conditions.find((c) => c.type === "EtcdClusterHealthy")!.reason,
      /, cluster version unreadable \(etcd \/version: no answer within 5000 ms\)$/,
    );
    w.faults.clusterVersionReadFails = false;
    const ok = await inspect({ stack: "lab", workDir: dir, env, edges: fakeEdges(w) });
    assert.equal(ok.etcdClusterVersion, "3.6.0");
    assert.ok(!("etcdClusterVersionError" in ok), "no error field when it was read");
  });

  describe("molt:images: bad input (nothing runs)", () => {
    const rows: [string, Record<string, unknown> | unknown, RegExp][] = [
      ["not a map", "k8s-v1.36.3", /molt:images: a map of Kubernetes minors to images/],
      [
        "a key that is not a minor",
        { "1.36.3": "k8s-v1.36.3" },
        /molt:images\.1\.36\.3: a map of Kubernetes minors to images, such as \{ "1\.36"/,
      ],
      ["an empty map", {}, /at least one minor/],
      ["an empty image", { "1.36": "" }, /an image name/],
      ["an image that does not exist", { "1.36": "k8s-v1.36.9" }, /"1.36".*lab image "k8s-v1.36.9" does not exist/],
      ["an etcd-only image", { "1.36": "etcd-v3.6.16" }, /"1.36".*runs etcd only/],
      ["an image of another minor", { "1.36": "k8s-v1.35.4" }, /"1.36".*runs Kubernetes 1.35.4, not a 1.36 version/],
      ["a minor above the target", { "1.38": "k8s-v1.37.2" }, /not a 1.38 version/],
      [
        "a version that does not match the lab image",
        { "1.36": { image: "k8s-v1.36.3", kubernetesVersion: "1.36.2" } },
        /"1.36".*1.36.2 does not match lab image "k8s-v1.36.3"/,
      ],
      [
        "the target's minor naming another image",
        { "1.37": { image: "k8s-v1.36.3", kubernetesVersion: "1.36.3" } },
        /"1.37".*not a 1.37 version/,
      ],
      [
        "an unknown field in an entry",
        { "1.36": { image: "k8s-v1.36.3", tag: "x" } },
        /molt:images\.1\.36: an image, or \{ image, kubernetesVersion \}/,
      ],
    ];
    for (const [what, value, message] of rows)
      it(`refuses ${what}`, async () => {
        stack(value as Record<string, unknown>);
        const w = cluster135();
        await assert.rejects(run(w), (e: unknown) => {
          assert.ok(e instanceof InvalidConfigError, String(e));
          assert.match(e.message, message);
          return true;
        });
        assert.deepEqual(w.log, [], "nothing ran");
      });

    it("refuses molt:images with an etcd-only target (no Kubernetes to chain)", async () => {
      writeFileSync(
        join(dir, "stacks", "Pulumi.lab.yaml"),
        stringify({
          config: {
            "molt:provider": "lab",
            "molt:replicas": 3,
            "molt:image": "etcd-v3.6.16",
            "molt:images": CHAIN,
            "molt:lab": { name: "chain", root: join(dir, "lab") },
          },
        }),
      );
      await assert.rejects(run(cluster135()), /molt:images: a chained upgrade needs a Kubernetes target/);
    });

    for (const [what, value, message] of [
      ["a negative soak", -1, /stepSoakSeconds: 0 \(no soak\) or more/],
      ["a fraction", 1.5, /stepSoakSeconds: a whole number of seconds/],
      ["more than a day", 86401, /stepSoakSeconds: at most 86400/],
      ["a string", "60", /stepSoakSeconds: seconds a chained upgrade's converged step is observed/],
    ] as const)
      it(`refuses molt:rollout.stepSoakSeconds: ${what}`, async () => {
        stack(CHAIN, { "molt:rollout": { stepSoakSeconds: value } });
        await assert.rejects(run(cluster135()), message);
      });
  });
});
