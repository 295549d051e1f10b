// Chained upgrades as a spec (orchestrator/core/plan/chain.ts): the chain derived from what
// the nodes run and molt:images, refused up front where a step is missing or would break a
// rule, and the planner walking it one minor at a time with every gate of a converged step
// holding before the next step's first node joins.
import * as assert from "node:assert/strict";
import fc from "fast-check";
import type { ChainImage, Intent, NodeEntry, Operation, World } from "../../orchestrator/core/model";
import { chainOf, decide } from "../../orchestrator/core/plan";
import { afterDecision, initialMemory } from "../../orchestrator/core/memory";

const STACK = "lab";
const img = (v: string) => `k8s-v${v}`;
const step = (v: string, etcd?: string): ChainImage => ({
  minor: v.split(".").slice(0, 2).join("."),
  image: img(v),
  kubernetesVersion: v,
  ...(etcd ? { etcdVersion: etcd } : {}),
});

function intentOf(target: string, chain: ChainImage[], o: { etcd?: string; stepSoakSeconds?: number } = {}): Intent {
  return {
    provider: "lab",
    replicas: 3,
    image: img(target),
    kubernetesVersion: target,
    ...(o.etcd ? { etcdVersion: o.etcd } : {}),
    ...(chain.length ? { chain } : {}),
    rollout: { maxSurge: 1, onFailure: "rollback", maxAppliedLag: 100 },
    timeouts: {
      joinSeconds: 300,
      settleSeconds: 60,
      drainSeconds: 300,
      ...(o.stepSoakSeconds ? { stepSoakSeconds: o.stepSoakSeconds } : {}),
    },
  };
}

const entry = (g: number, v: string, image = img(v)): NodeEntry => ({
  name: `lab-cp-${g}`,
  image,
  kubernetesVersion: v,
  role: "control-plane",
  generation: g,
  init: g === 1,
});

/** A healthy cluster of `versions` (one node each), Kubernetes observed: kubeadm-config and kube-proxy as given. */
function world(
  intent: Intent,
  versions: string[],
  o: { cc?: string; proxy?: string; expired?: World["expired"]; unhealthy?: string; etcd?: string } = {},
): World {
  const nodes = versions.map((v, i) => entry(i + 1, v));
  const id = (n: NodeEntry) => String(1000 + n.generation);
  return {
    intent,
    nodes,
    endpoints: nodes.map((n) => ({
      name: n.name,
      privateAddress: `10.0.0.${n.generation}`,
      sshHost: `10.0.0.${n.generation}`,
      sshPort: 22,
      hostPublicKey: "ssh-ed25519 AAAA",
      providerId: `fake/${n.name}`,
    })),
    orphans: [],
    expired: o.expired ?? [],
    etcd: {
      members: nodes.map((n) => ({
        id: id(n),
        name: n.name,
        peerURLs: [`https://10.0.0.${n.generation}:2380`],
        clientURLs: [],
        isLearner: false,
      })),
      status: Object.fromEntries(
        nodes.map((n) => [
          n.name,
          n.name === o.unhealthy
            ? { ok: false, error: "context deadline exceeded" }
            : {
                ok: true,
                status: {
                  memberId: id(n),
                  leader: id(nodes[0]),
                  raftIndex: 100n,
                  raftAppliedIndex: 100n,
                  raftTerm: 2n,
                  dbSize: 1,
                  isLearner: false,
                  version: o.etcd ?? "3.6.16",
                  errors: [],
                },
              },
        ]),
      ),
      alarms: [],
    },
    kube: {
      via: nodes[nodes.length - 1].name,
      nodes: nodes.map((n) => ({
        name: n.name,
        ready: true,
        unschedulable: false,
        controlPlane: true,
        kubeletVersion: `v${n.kubernetesVersion}`,
        leaseAgeSeconds: 1,
      })),
      components: Object.fromEntries(
        nodes.map((n) => [
          n.name,
          {
            apiserver: { ok: true, version: n.kubernetesVersion },
            controllerManager: { ok: true },
            scheduler: { ok: true },
          },
        ]),
      ),
      evictable: {},
      clusterConfigVersion: o.cc ?? versions[versions.length - 1],
      kubeProxy: { version: o.proxy ?? versions[0], rolledOut: true },
    },
  };
}

const CHAIN = [step("1.35.4", "3.6.16"), step("1.36.3", "3.6.16")];
const TARGET = "1.37.2";
const intent = (o: { stepSoakSeconds?: number } = {}) => intentOf(TARGET, CHAIN, { etcd: "3.7.3", ...o });

const refusal = (op: Operation): string => {
  assert.equal(op.kind, "refuse", `expected a refusal, got ${op.kind}: ${op.reason}`);
  return op.reason;
};

describe("chained upgrades (orchestrator/core/plan/chain.ts)", () => {
  describe("chainOf: table", () => {
    it("no molt:images: no chain (the ordinary skip-level refusal stands)", () => {
      const i = intentOf(TARGET, []);
      assert.deepEqual(chainOf(world(i, ["1.35.4"]).nodes, i), { kind: "none" });
      assert.match(refusal(decide(world(i, ["1.35.4", "1.35.4", "1.35.4"]), STACK)), /skips a minor/);
    });

    it("a cluster two minors behind: the steps from its minor to the target, the first step's intent", () => {
      const r = chainOf(world(intent(), ["1.35.4", "1.35.4", "1.35.4"]).nodes, intent());
      assert.equal(r.kind, "chain");
      if (r.kind !== "chain") return;
      assert.deepEqual(
        r.chain.steps.map((s) => [s.kubernetesVersion, s.image, s.state, s.nodes.length]),
        [
          ["1.35.4", "k8s-v1.35.4", "reached", 3],
          ["1.36.3", "k8s-v1.36.3", "next", 0],
          ["1.37.2", "k8s-v1.37.2", "pending", 0],
        ],
      );
      assert.equal(r.chain.current, 1);
      assert.equal(r.chain.intent.image, "k8s-v1.36.3");
      assert.equal(r.chain.intent.kubernetesVersion, "1.36.3");
      assert.equal(r.chain.intent.etcdVersion, "3.6.16");
      assert.equal(r.chain.settle?.step.kubernetesVersion, "1.35.4");
    });

    it("a gap in the image map is refused, naming every missing minor", () => {
      const i = intentOf("1.38.1", [step("1.36.3")]);
      const r = chainOf(world(i, ["1.35.4", "1.35.4", "1.35.4"]).nodes, i);
      assert.equal(r.kind, "refuse");
      if (r.kind !== "refuse") return;
      assert.match(r.reason, /3 minors ahead/);
      assert.match(r.reason, /names no image for 1\.37\b/);
      assert.doesNotMatch(r.reason, /1\.36,/);
      assert.match(r.reason, /"1\.37": <its image>/);
      assert.match(r.reason, /nothing was changed/);
    });

    // " 1.35.4": a leading space counts, as the one parser reads it (plan/versions.ts); the old
    // parser left that node out, and the chain settled 1.36 first.
    for (const first of ["1.35.4", " 1.35.4"])
      it(`a cluster between steps (${JSON.stringify(first)} and 1.36): 1.36 rolls on, nothing to settle`, () => {
        const r = chainOf(world(intent(), [first, "1.36.3", "1.36.3"]).nodes, intent());
        assert.equal(r.kind, "chain");
        if (r.kind !== "chain") return;
        assert.deepEqual(
          r.chain.steps.map((s) => [s.kubernetesVersion, s.state, s.nodes]),
          [
            ["1.35.4", "left", ["lab-cp-1"]],
            ["1.36.3", "rolling", ["lab-cp-2", "lab-cp-3"]],
            ["1.37.2", "pending", []],
          ],
        );
        assert.equal(r.chain.intent.kubernetesVersion, "1.36.3");
        assert.equal(r.chain.settle, undefined);
      });

    it("a cluster that finished a step (all on 1.36): that step's gates first, then the last step", () => {
      const r = chainOf(world(intent(), ["1.36.3", "1.36.3", "1.36.3"]).nodes, intent());
      assert.equal(r.kind, "chain");
      if (r.kind !== "chain") return;
      assert.deepEqual(
        r.chain.steps.map((s) => [s.kubernetesVersion, s.state]),
        [
          ["1.36.3", "reached"],
          ["1.37.2", "next"],
        ],
      );
      assert.equal(r.chain.settle?.intent.image, "k8s-v1.36.3");
      assert.equal(r.chain.intent.image, "k8s-v1.37.2");
    });

    it("the last step in progress (nodes on 1.36 and 1.37): the ordinary rollout decides", () => {
      assert.deepEqual(chainOf(world(intent(), ["1.36.3", "1.37.2"]).nodes, intent()), { kind: "none" });
    });

    it("a downgrade in the middle is refused: a node newer than its minor's step", () => {
      const i = intentOf(TARGET, [step("1.35.4"), step("1.36.3")]);
      const r = chainOf(world(i, ["1.35.4", "1.36.5", "1.36.5"]).nodes, i);
      assert.equal(r.kind, "refuse");
      if (r.kind !== "refuse") return;
      assert.match(r.reason, /lab-cp-2 runs Kubernetes 1\.36\.5, newer than the chain's 1\.36 step/);
      assert.match(r.reason, /downgrade/);
    });

    it("a reached step whose image is older than what the nodes run is refused too", () => {
      const r = chainOf(world(intent(), ["1.35.6", "1.35.6", "1.35.6"]).nodes, intent());
      assert.equal(r.kind, "refuse");
      if (r.kind === "refuse") assert.match(r.reason, /1\.35\.6, newer than the chain's 1\.35 step/);
    });

    it("nodes two minors apart are refused (no step joins them)", () => {
      const i = intentOf("1.38.0", [step("1.36.3"), step("1.37.2")]);
      const r = chainOf(world(i, ["1.35.4", "1.37.2"]).nodes, i);
      assert.equal(r.kind, "refuse");
      if (r.kind === "refuse") assert.match(r.reason, /more than one apart/);
    });

    it("etcd's rules between the steps are checked before the first step: a skipped etcd minor", () => {
      const i = intentOf(TARGET, [step("1.35.4", "3.5.35"), step("1.36.3", "3.5.35")], { etcd: "3.7.3" });
      const r = chainOf(world(i, ["1.35.4", "1.35.4", "1.35.4"]).nodes, i);
      assert.equal(r.kind, "refuse");
      if (r.kind === "refuse") assert.match(r.reason, /step 1\.36 -> 1\.37 breaks etcd's rules.*one minor at a time/);
    });

    it("etcd's patch floor between the steps (3.6.5 -> 3.7) is refused before the first step", () => {
      const i = intentOf(TARGET, [step("1.35.4", "3.6.16"), step("1.36.3", "3.6.5")], { etcd: "3.7.3" });
      const r = chainOf(world(i, ["1.35.4", "1.35.4", "1.35.4"]).nodes, i);
      assert.equal(r.kind, "refuse");
      if (r.kind === "refuse") assert.match(r.reason, /3\.6\.11 or later/);
    });
  });

  describe("chainOf: versions as the one parser reads them (plan/versions.ts)", () => {
    it("a step's etcd version without a patch is read by its minor (was: not a version, not checked)", () => {
      const i = intentOf(TARGET, [step("1.35.4", "3.5"), step("1.36.3", "3.5")], { etcd: "3.7.3" });
      const r = chainOf(world(i, ["1.35.4", "1.35.4", "1.35.4"]).nodes, i);
      assert.equal(r.kind, "refuse");
      if (r.kind === "refuse") assert.match(r.reason, /step 1\.36 -> 1\.37 breaks etcd's rules.*one minor at a time/);
    });

    it("a node's version without a patch is not a Kubernetes version: left out (as before)", () => {
      const r = chainOf(world(intent(), ["1.35", "1.36.3", "1.36.3"]).nodes, intent());
      assert.equal(r.kind, "chain");
      if (r.kind === "chain") assert.equal(r.chain.settle?.step.kubernetesVersion, "1.36.3");
    });
  });

  describe("decide: walking the chain", () => {
    it("the first step's first change: kubeadm-config to 1.36.3 (not to the target), reason names the step", () => {
      const op = decide(world(intent(), ["1.35.4", "1.35.4", "1.35.4"]), STACK);
      assert.equal(op.kind, "update-cluster-config");
      if (op.kind === "update-cluster-config") assert.equal(op.version, "1.36.3");
      assert.match(op.reason, /^chain 1\.35\.4 -> 1\.36\.3 -> 1\.37\.2, step 2\/3 \(1\.36\.3\)/);
    });

    it("then a surge of a 1.36.3 node on the 1.36 image", () => {
      const op = decide(world(intent(), ["1.35.4", "1.35.4", "1.35.4"], { cc: "1.36.3" }), STACK);
      assert.equal(op.kind, "surge");
      if (op.kind === "surge") {
        assert.equal(op.entry.image, "k8s-v1.36.3");
        assert.equal(op.entry.kubernetesVersion, "1.36.3");
      }
    });

    it("a reached step converges first: kube-proxy still on 1.35 is updated to 1.36 before any 1.37 change", () => {
      const op = decide(world(intent(), ["1.36.3", "1.36.3", "1.36.3"], { cc: "1.36.3", proxy: "1.35.4" }), STACK);
      assert.equal(op.kind, "update-addons");
      if (op.kind === "update-addons") assert.equal(op.version, "1.36.3");
      assert.match(op.reason, /step 1\/2 \(1\.36\.3\)/);
    });

    it("an unhealthy node of the reached step holds the next step back (a wait, no change)", () => {
      const w = world(intent(), ["1.36.3", "1.36.3", "1.36.3"], {
        cc: "1.36.3",
        proxy: "1.36.3",
        unhealthy: "lab-cp-2",
      });
      const op = decide(w, STACK);
      assert.equal(op.kind, "wait");
    });

    it("kubeadm-config already raised by the next step is not lowered again (a crash before its surge)", () => {
      const op = decide(world(intent(), ["1.36.3", "1.36.3", "1.36.3"], { cc: "1.37.2", proxy: "1.36.3" }), STACK);
      assert.equal(op.kind, "surge");
      if (op.kind === "surge") assert.equal(op.entry.image, "k8s-v1.37.2");
    });

    it("molt:rollout.stepSoakSeconds: the converged step is soaked, then the next step starts", () => {
      const soaking = intent({ stepSoakSeconds: 30 });
      const op = decide(world(soaking, ["1.36.3", "1.36.3", "1.36.3"], { cc: "1.36.3", proxy: "1.36.3" }), STACK);
      assert.equal(op.kind, "wait");
      if (op.kind === "wait") assert.equal(op.key, "step-soak:1.36");
      const after = decide(
        world(soaking, ["1.36.3", "1.36.3", "1.36.3"], {
          cc: "1.36.3",
          proxy: "1.36.3",
          expired: ["step-soak:1.36"],
        }),
        STACK,
      );
      assert.equal(after.kind, "update-cluster-config");
    });

    it("a chain refused for a missing image changes nothing, whatever else the world needs", () => {
      const i = intentOf(TARGET, [step("1.35.4")], { etcd: "3.7.3" });
      assert.match(refusal(decide(world(i, ["1.35.4", "1.35.4", "1.35.4"]), STACK)), /names no image for 1\.36/);
    });

    it("the target reached: done, as an ordinary converged rollout", () => {
      const op = decide(world(intent(), ["1.37.2", "1.37.2", "1.37.2"], { proxy: "1.37.2" }), STACK);
      assert.equal(op.kind, "done");
    });
  });

  describe("the step soak in the loop's memory (core/memory.ts)", () => {
    const timeouts = { joinSeconds: 300, settleSeconds: 60, drainSeconds: 300, stepSoakSeconds: 30 };
    const soakOp: Operation = { kind: "wait", key: "step-soak:1.36", reason: "soaking" };
    const healthOp: Operation = { kind: "wait", key: "health:lab-cp-2", node: "lab-cp-2", reason: "unhealthy" };

    it("passes once it lasted stepSoakSeconds without a break", () => {
      let m = afterDecision(initialMemory, soakOp, 0, timeouts).memory;
      const d = afterDecision(m, soakOp, 31_000, timeouts);
      m = d.memory;
      assert.equal(d.expiredNow, "step-soak:1.36");
      assert.ok(m.expired.includes("step-soak:1.36"));
    });

    it("starts over when any other wait comes between (the cluster was not healthy throughout)", () => {
      let m = afterDecision(initialMemory, soakOp, 0, timeouts).memory;
      m = afterDecision(m, healthOp, 20_000, timeouts).memory;
      const d = afterDecision(m, soakOp, 31_000, timeouts);
      assert.equal(d.expiredNow, undefined, "restarted at 31 s, not passed");
      assert.equal(d.memory.waits["step-soak:1.36"], 31_000);
    });
  });

  describe("properties", () => {
    const MAJOR = 1;
    const arb = fc.record({
      start: fc.integer({ min: 30, max: 34 }),
      ahead: fc.integer({ min: 0, max: 4 }),
      named: fc.array(fc.boolean(), { minLength: 5, maxLength: 5 }),
      mixed: fc.nat({ max: 3 }),
    });

    it("a minor on the way without an image is refused naming it; otherwise no change goes past the next minor", () => {
      fc.assert(
        fc.property(arb, ({ start, ahead, named, mixed }) => {
          const target = start + ahead;
          const chain = named.flatMap((on, i) => (on && start + i < target ? [step(`${MAJOR}.${start + i}.2`)] : []));
          const i = intentOf(`${MAJOR}.${target}.1`, chain);
          // `mixed` nodes already on the next minor when a step is in flight.
          const inFlight = ahead >= 2 && chain.some((c) => c.minor === `${MAJOR}.${start + 1}`) ? mixed : 0;
          const versions = [0, 1, 2].map((k) => (k < inFlight ? `${MAJOR}.${start + 1}.2` : `${MAJOR}.${start}.2`));
          const op = decide(world(i, versions, { cc: versions[versions.length - 1] }), STACK);
          const lo = inFlight === 3 ? start + 1 : start;
          const missing: number[] = [];
          for (let m = lo + 1; m < target; m++) if (!chain.some((c) => c.minor === `${MAJOR}.${m}`)) missing.push(m);
          if (target - lo >= 2 && chain.length === 0) {
            // No molt:images at all: the ordinary skip-level refusal.
            assert.match(refusal(op), /skips a minor/);
            return;
          }
          if (target - lo >= 2 && missing.length) {
            const reason = refusal(op);
            for (const m of missing) assert.match(reason, new RegExp(`\\b${MAJOR}\\.${m}\\b`));
            return;
          }
          if (target - lo >= 2 || (target - lo === 1 && chain.some((c) => c.minor === `${MAJOR}.${lo}`)))
            assert.notEqual(op.kind, "refuse", op.reason);
          const minorOf = (v: string) => Number(v.split(".")[1]);
          if (op.kind === "surge") assert.ok(minorOf(op.entry.kubernetesVersion!) <= lo + 1, op.reason);
          if (op.kind === "update-cluster-config") assert.ok(minorOf(op.version) <= lo + 1, op.reason);
        }),
        { numRuns: 300 },
      );
    });

    it("a step older than a node of its minor (a downgrade in the middle) is always refused", () => {
      fc.assert(
        fc.property(fc.nat({ max: 9 }), fc.nat({ max: 9 }), (nodePatch, stepPatch) => {
          const i = intentOf(TARGET, [step("1.35.4"), step(`1.36.${stepPatch}`)]);
          const op = decide(world(i, ["1.35.4", `1.36.${nodePatch}`, `1.36.${nodePatch}`], { cc: "1.36.0" }), STACK);
          if (nodePatch > stepPatch) assert.match(refusal(op), /downgrade/);
          else assert.notEqual(op.kind, "refuse", op.reason);
        }),
        { numRuns: 200 },
      );
    });
  });
});
