// The promotion rules as tables (orchestrator/promotion/rules.ts, release.ts, config-edit.ts):
// which records verify which release, how a soak resumes, what a release must agree with,
// and how a release is written into a stack's config file.
import * as assert from "node:assert/strict";
import { parse } from "yaml";
import type { Intent, World } from "../../orchestrator/core/model";
import { lineDiff, withRelease } from "../../orchestrator/promotion/config-edit";
import type { VerificationRecord } from "../../orchestrator/promotion/record";
import { releaseDigest, type Release } from "../../orchestrator/promotion/release";
import {
  promotionTargetProblem,
  releaseIntentProblems,
  resumeSoak,
  soakDone,
  soakIntervalMs,
  soakMaxGapMs,
  soakProblem,
  verificationProblem,
} from "../../orchestrator/promotion/rules";

const R1: Release = {
  name: "k8s-1.37.2-os-2026-11",
  kubernetesVersion: "1.37.2",
  etcdVersion: "3.6.16",
  images: { staging: "ami-0aaa", prod: "ami-0bbb" },
};

function record(o: { release?: Release; digest?: string; stack?: string; soak?: "running" | "passed" } = {}) {
  const release = o.release ?? R1;
  const r: VerificationRecord = {
    kind: "molt-verification",
    version: 1,
    stack: o.stack ?? "staging",
    release,
    digest: o.digest ?? releaseDigest(release),
    converged: {
      at: "2026-12-01T10:00:00.000Z",
      result: "succeeded",
      operations: 10,
      failures: 0,
      wallMs: 1,
      nodes: [],
    },
    soak: {
      minutes: 30,
      startedAt: "2026-12-01T10:00:00.000Z",
      lastHealthyAt: "2026-12-01T10:30:00.000Z",
      observations: 40,
      result: o.soak ?? "passed",
      ...(o.soak === "running" ? {} : { passedAt: "2026-12-01T10:30:00.000Z" }),
    },
    writtenAt: "2026-12-01T10:30:00.000Z",
    writtenBy: "runner",
  };
  return r;
}

describe("promotion rules (orchestrator/promotion/)", () => {
  describe("releaseDigest", () => {
    it("is the same for the same release whatever the key order or a 'v' prefix", () => {
      const a = releaseDigest(R1);
      const b = releaseDigest({
        images: { prod: "ami-0bbb", staging: "ami-0aaa" },
        etcdVersion: "v3.6.16",
        kubernetesVersion: "v1.37.2",
        name: R1.name,
      });
      assert.equal(a, b);
      assert.match(a, /^sha256:[0-9a-f]{64}$/);
    });
    const changed: [string, Release][] = [
      ["another prod image", { ...R1, images: { ...R1.images, prod: "ami-0ccc" } }],
      ["an added stack", { ...R1, images: { ...R1.images, dr: "ami-0ddd" } }],
      ["another Kubernetes patch", { ...R1, kubernetesVersion: "1.37.3" }],
      ["no etcd version", { name: R1.name, kubernetesVersion: "1.37.2", images: R1.images }],
      ["another name", { ...R1, name: "other" }],
    ];
    for (const [what, r] of changed)
      it(`differs for ${what}`, () => assert.notEqual(releaseDigest(r), releaseDigest(R1)));
  });

  describe("verificationProblem: which record verifies a release", () => {
    const rows: [string, VerificationRecord | undefined, RegExp | undefined][] = [
      ["a passed, intact record of this release", record(), undefined],
      ["no record", undefined, /has no verification record on stack staging/],
      [
        "a soak still running",
        record({ soak: "running" }),
        /soak .* has not finished: run molt verify --stack staging/,
      ],
      [
        "a record whose release was edited (prod image) but not its digest",
        { ...record(), release: { ...R1, images: { ...R1.images, prod: "ami-0evil" } } },
        /was altered after it was written/,
      ],
      ["a record whose digest was edited", record({ digest: "sha256:" + "0".repeat(64) }), /was altered/],
      [
        "an intact record of another release under the same name",
        record({ release: { ...R1, images: { ...R1.images, prod: "ami-0ccc" } } }),
        /verified a different release under the name/,
      ],
      ["a record of another stack copied here", record({ stack: "dev" }), /names stack dev: it was copied/],
    ];
    for (const [what, r, want] of rows)
      it(`${want ? "refuses" : "accepts"} ${what}`, () => {
        const p = verificationProblem(r, R1, "staging");
        if (want === undefined) assert.equal(p, undefined);
        else assert.match(p ?? "", want);
      });
  });

  describe("the soak's clock", () => {
    const t = Date.parse("2026-12-01T10:30:00.000Z");
    const soak = record({ soak: "running" }).soak; // last healthy at 10:30
    const rows: [string, number, boolean][] = [
      ["resumes right after an interruption", t + 5_000, true],
      ["resumes at the maximum gap", t + soakMaxGapMs(30), true],
      ["restarts after a longer gap", t + soakMaxGapMs(30) + 1, false],
      ["restarts when the last healthy time lies in the future (another clock)", t - 10_000, false],
    ];
    for (const [what, now, resumed] of rows)
      it(what, () => {
        const c = resumeSoak(soak, now, soakMaxGapMs(30));
        assert.equal(c.resumed, resumed);
        assert.equal(c.startedAt, resumed ? Date.parse(soak.startedAt) : now);
        if (!resumed) assert.match(c.restartReason ?? "", /starts over/);
      });
    it("observes 20 times per soak, between every 1 s and every 30 s", () => {
      assert.equal(soakIntervalMs(0.05), 1_000);
      assert.equal(soakIntervalMs(2), 6_000);
      assert.equal(soakIntervalMs(60), 30_000);
      assert.equal(soakMaxGapMs(60), 90_000);
      assert.equal(soakMaxGapMs(1), 60_000);
    });
    const done: [number, number, number, boolean][] = [
      [0.1, 6_000, 3, true],
      [0.1, 5_999, 9, false],
      [0.1, 60_000, 1, false], // one observation is not "observed repeatedly"
      [0, 0, 2, true],
    ];
    for (const [minutes, elapsed, n, want] of done)
      it(`a ${minutes} min soak after ${elapsed} ms and ${n} observations is ${want ? "" : "not "}done`, () =>
        assert.equal(soakDone(1000, 1000 + elapsed, minutes, n), want));
  });

  describe("releaseIntentProblems: the release and what the stack runs agree", () => {
    const intent = (o: Partial<Intent>): Intent => ({
      provider: "aws",
      replicas: 3,
      image: "ami-0aaa",
      kubernetesVersion: "1.37.2",
      etcdVersion: "3.6.16",
      rollout: { maxSurge: 1, onFailure: "rollback", maxAppliedLag: 1000 },
      timeouts: { joinSeconds: 300, settleSeconds: 60, drainSeconds: 300 },
      ...o,
    });
    const rows: [string, Release, Partial<Intent>, RegExp | undefined][] = [
      ["matching", R1, {}, undefined],
      ["a cloud without a known etcd version", R1, { etcdVersion: undefined }, undefined],
      ["another image", R1, { image: "ami-0zzz" }, /images.staging: ami-0aaa is not molt:image \(ami-0zzz\)/],
      ["an etcd the image does not carry", R1, { etcdVersion: "3.7.3" }, /carries etcd 3.7.3/],
      [
        "a release without Kubernetes on a Kubernetes stack",
        { ...R1, kubernetesVersion: undefined },
        {},
        /write 1.37.2/,
      ],
      [
        "a release with Kubernetes on an etcd-only image",
        R1,
        { kubernetesVersion: undefined },
        /runs no Kubernetes .* remove it/,
      ],
    ];
    for (const [what, r, i, want] of rows)
      it(`${want ? "refuses" : "accepts"} ${what}`, () => {
        const p = releaseIntentProblems(r, intent(i), "staging");
        if (!want) assert.deepEqual(p, []);
        else assert.match(p.join("\n"), want);
      });
  });

  describe("promotionTargetProblem", () => {
    it("refuses a target without an image in the release, naming the stacks it has", () =>
      assert.match(
        promotionTargetProblem(R1, "staging", "dr") ?? "",
        /no image for stack dr \(images for: staging, prod\)/,
      ));
    it("refuses promoting a stack to itself", () =>
      assert.match(promotionTargetProblem(R1, "prod", "prod") ?? "", /both prod/));
    it("accepts a target the release names", () =>
      assert.equal(promotionTargetProblem(R1, "staging", "prod"), undefined));
  });

  describe("soakProblem: one observed world", () => {
    const base = (): World => ({
      intent: {
        provider: "lab",
        replicas: 1,
        image: "lab-v2",
        rollout: { maxSurge: 1, onFailure: "rollback", maxAppliedLag: 1000 },
        timeouts: { joinSeconds: 300, settleSeconds: 60, drainSeconds: 300 },
      },
      nodes: [{ name: "s-cp-1", image: "lab-v2", role: "control-plane", generation: 1, init: true }],
      endpoints: [],
      orphans: [],
      expired: [],
      etcd: {
        members: [{ id: "1", name: "s-cp-1", peerURLs: [], clientURLs: [], isLearner: false }],
        status: {
          "s-cp-1": {
            ok: true,
            status: {
              leader: "1",
              raftIndex: 10n,
              raftAppliedIndex: 10n,
              raftTerm: 2n,
              isLearner: false,
              dbSize: 1,
              version: "3.4.23",
              errors: [],
            } as never,
          },
        },
        alarms: [],
      },
    });
    it("finds a converged, healthy cluster healthy", () => assert.equal(soakProblem(base(), "s"), undefined));
    it("finds a member that does not answer unhealthy", () => {
      const w = base();
      w.etcd!.status["s-cp-1"] = { ok: false, error: "connection refused" };
      assert.match(soakProblem(w, "s") ?? "", /not a healthy voter: s-cp-1/);
    });
    it("finds an alarm", () => {
      const w = base();
      w.etcd!.alarms = [{ memberId: "1", alarm: "NOSPACE" }] as never;
      assert.match(soakProblem(w, "s") ?? "", /alarm/);
    });
    it("finds a node not on the release", () => {
      const w = base();
      w.nodes[0].image = "lab-v1";
      assert.match(soakProblem(w, "s") ?? "", /not on the release: s-cp-1 \(lab-v1\)/);
    });
    it("finds etcd that cannot be observed", () => {
      const w = base();
      delete w.etcd;
      w.etcdError = "no SSH";
      assert.match(soakProblem(w, "s") ?? "", /etcd cannot be observed: no SSH/);
    });
  });

  describe("writing a release into a stack's config", () => {
    const before = [
      "# prod: reviewed by the platform team",
      "config:",
      "  molt:provider: aws",
      "  molt:replicas: 3 # odd",
      "  molt:image: ami-0old",
      "  molt:kubernetesVersion: 1.36.3",
      "  aws:region: eu-central-1",
      "",
    ].join("\n");
    it("sets the image, the version and molt:release, keeping comments and other keys", () => {
      const after = withRelease(before, R1, "prod");
      assert.match(after, /# prod: reviewed by the platform team/);
      assert.match(after, /molt:replicas: 3 # odd/);
      const c = (parse(after) as { config: Record<string, unknown> }).config;
      assert.equal(c["molt:image"], "ami-0bbb");
      assert.equal(c["molt:kubernetesVersion"], "1.37.2");
      assert.deepEqual(c["molt:release"], R1);
      assert.equal(c["aws:region"], "eu-central-1");
      const d = lineDiff(before, after, "stacks/Pulumi.prod.yaml");
      assert.match(d, /^- {2}molt:image: ami-0old$/m);
      assert.match(d, /^\+ {2}molt:image: ami-0bbb$/m);
      assert.match(d, /^- {2}molt:kubernetesVersion: 1.36.3$/m);
      assert.doesNotMatch(d, /^[-+].*aws:region/m);
    });
    it("leaves a lab stack without molt:kubernetesVersion without it (the image decides)", () => {
      const lab = "config:\n  molt:provider: lab\n  molt:image: lab-v1\n";
      const after = withRelease(
        lab,
        { name: "r", images: { prod: "k8s-v1.37.2" }, kubernetesVersion: "1.37.2" },
        "prod",
      );
      assert.equal((parse(after) as { config: Record<string, unknown> }).config["molt:kubernetesVersion"], undefined);
    });
    it("is a no-op diff when the release is already there", () => {
      const once = withRelease(before, R1, "prod");
      assert.equal(lineDiff(once, withRelease(once, R1, "prod"), "f"), "");
    });
    it("refuses a file without config:", () => assert.throws(() => withRelease("a: 1\n", R1, "prod"), /no `config:`/));
  });
});
