// The promotion rules as tables (orchestrator/promotion/rules.ts, release.ts, config-edit.ts):
// which records verify which release, how a soak resumes, what a release must agree with,
// and how a release is written into a stack's config file.
import * as assert from "node:assert/strict";
import { parse } from "yaml";
import type { Intent, World } from "../../orchestrator/core/model";
import { lineDiff, withRelease } from "../../orchestrator/promotion/config-edit";
import { generateKeyPairSync } from "node:crypto";
import { canonicalJson } from "../../orchestrator/promotion/canonical";
import { recordBytes, recordDigestOf, type VerificationRecord } from "../../orchestrator/promotion/record";
import { releaseDigest, type Release } from "../../orchestrator/promotion/release";
import { signerOf, type RecordSigner } from "../../orchestrator/promotion/signing";
import {
  promotionTargetProblem,
  releaseIntentProblems,
  resumeSoak,
  soakDone,
  soakIntervalMs,
  soakMaxGapMs,
  soakProblem,
  verificationProblem,
  verificationWarning,
  type Trust,
} from "../../orchestrator/promotion/rules";

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
/** Every key name in a value (for a JSON replacer that writes them all, in another order). */
function flatKeys(v: unknown, into: Record<string, true> = {}): Record<string, true> {
  if (v && typeof v === "object")
    for (const [k, x] of Object.entries(v)) {
      into[k] = true;
      flatKeys(x, into);
    }
  return into;
}

const R1: Release = {
  name: "k8s-1.37.2-os-2026-11",
  kubernetesVersion: "1.37.2",
  etcdVersion: "3.6.16",
  images: { staging: "ami-0aaa", prod: "ami-0bbb" },
};

const T0 = "2026-12-01T10:00:00.000Z";
const T30 = "2026-12-01T10:30:00.000Z";

/** A v2 record as molt writes it (sealed with its digest, signed with `signer`), then `edit`ed as a forger would. */
function record(
  o: {
    release?: Release;
    digest?: string;
    stack?: string;
    soak?: "running" | "passed";
    signer?: RecordSigner;
    /** Changes the content before it is sealed (a record molt could have written, or a forger who reseals). */
    content?: (r: VerificationRecord) => void;
    /** Changes the sealed record (an edit by hand). */
    edit?: (r: VerificationRecord) => void;
  } = {},
): VerificationRecord {
  // A copy: an edit must never reach R1 (the release the rows check against).
  const release = structuredClone(o.release ?? R1);
  const running = o.soak === "running";
  const r: VerificationRecord = {
    kind: "molt-verification",
    version: 2,
    stack: o.stack ?? "staging",
    release,
    digest: o.digest ?? releaseDigest(release),
    converged: {
      at: T0,
      result: "succeeded",
      operations: 10,
      failures: 0,
      wallMs: 1,
      nodes: ["a", "b", "c"].map((n) => ({
        name: `staging-cp-${n}`,
        image: release.images.staging,
        kubernetesVersion: release.kubernetesVersion,
      })),
    },
    soak: {
      minutes: 30,
      startedAt: T0,
      lastHealthyAt: T30,
      observations: running ? 14 : 40,
      result: running ? "running" : "passed",
      ...(running ? {} : { passedAt: T30 }),
    },
    writtenAt: T30,
    writtenBy: "runner",
  };
  o.content?.(r);
  r.recordDigest = recordDigestOf(r);
  if (o.signer) r.signature = { algorithm: "ed25519", keyId: o.signer.keyId, value: o.signer.sign(recordBytes(r)) };
  o.edit?.(r);
  return r;
}
const KEY = signerOf(generateKeyPairSync("ed25519").privateKey);
const OTHER_KEY = signerOf(generateKeyPairSync("ed25519").privateKey);

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
    const other = { ...R1, images: { ...R1.images, prod: "ami-0ccc" } };
    const rows: [string, VerificationRecord | undefined, RegExp | undefined, Trust?][] = [
      ["a passed, intact record of this release", record(), undefined],
      ["no record", undefined, /has no verification record on stack staging/],
      [
        "a soak still running",
        record({ soak: "running" }),
        /soak .* has not finished: run molt verify --stack staging/,
      ],
      ["a record of another stack copied here", record({ stack: "dev" }), /names stack dev: it was copied/],
      [
        "an intact record of another release under the same name",
        record({ release: other }),
        /verified a different release under the name/,
      ],
      [
        "a record an older molt wrote (version 1: only the release covered)",
        record({ edit: (r) => ((r.version = 1), delete r.recordDigest) }),
        /written by an older molt, whose digest covers only the release/,
      ],
      // Edited by hand: any field.
      ...(
        [
          ["release (prod image)", (r) => (r.release.images.prod = "ami-0evil")],
          ["release digest", (r) => (r.digest = "sha256:" + "0".repeat(64))],
          ["record digest", (r) => (r.recordDigest = "sha256:" + "1".repeat(64))],
          [
            "soak.result running -> passed",
            (r) => ((r.soak.result = "passed"), (r.soak.passedAt = r.soak.lastHealthyAt)),
          ],
          ["converged.nodes[0].image", (r) => (r.converged.nodes[0].image = "ami-0evil")],
          ["converged.operations", (r) => (r.converged.operations = 0)],
          ["soak.minutes", (r) => (r.soak.minutes = 0.1)],
          ["soak.observations", (r) => (r.soak.observations = 2)],
          ["writtenBy", (r) => (r.writtenBy = "laptop")],
        ] as [string, (r: VerificationRecord) => void][]
      ).map(
        ([what, edit]) =>
          [
            `a record whose ${what} was edited`,
            record({ soak: /running/.test(what) ? "running" : "passed", edit }),
            /altered after it was written/,
          ] as [string, VerificationRecord, RegExp],
      ),
      // Edited and resealed (the digest recomputed): the content must still hold together.
      [
        "a never-soaked record made 'passed' (resealed): its soak did not last its minutes",
        record({
          soak: "running",
          content: (r) => {
            r.soak.result = "passed";
            r.soak.lastHealthyAt = r.soak.passedAt = "2026-12-01T10:00:30.000Z";
          },
        }),
        /does not hold together \(its soak passed 0\.50 min after it started, but a soak lasts 30 min\)/,
      ],
      [
        "a passed soak without passedAt (resealed)",
        record({ content: (r) => delete r.soak.passedAt }),
        /a passed soak without passedAt/,
      ],
      [
        "a running soak with a passedAt (resealed)",
        record({ soak: "running", content: (r) => (r.soak.passedAt = r.soak.lastHealthyAt) }),
        /a running soak has a passedAt/,
      ],
      [
        "a soak that passed on one observation (resealed)",
        record({ content: (r) => (r.soak.observations = 1) }),
        /passed on 1 observation\(s\), not at least 2/,
      ],
      [
        "a soak that passed before its last healthy observation (resealed)",
        record({ content: (r) => (r.soak.passedAt = "2026-12-01T10:40:00.000Z") }),
        /not on its last healthy observation/,
      ],
      [
        "a soak that started before the convergence (resealed)",
        record({ content: (r) => (r.soak.startedAt = "2026-12-01T09:00:00.000Z") }),
        /its soak started at .* before it converged/,
      ],
      [
        "a node not on the release's image (resealed)",
        record({ content: (r) => (r.converged.nodes[0].image = "ami-0evil") }),
        /node staging-cp-a runs ami-0evil, not the release's image ami-0aaa/,
      ],
      [
        "a node on another Kubernetes version (resealed)",
        record({ content: (r) => (r.converged.nodes[2].kubernetesVersion = "1.36.3") }),
        /node staging-cp-c runs Kubernetes 1.36.3, not the release's 1.37.2/,
      ],
      [
        "a record of no nodes (resealed)",
        record({ content: (r) => (r.converged.nodes = []) }),
        /converged on no nodes/,
      ],
      [
        "a node listed twice (resealed)",
        record({ content: (r) => (r.converged.nodes[1].name = r.converged.nodes[0].name) }),
        /listed twice/,
      ],
      [
        "a soak shorter than the source's config asks for",
        record(),
        /soaked 30 min on stack staging, but staging's config asks for 60/,
        { soakMinutes: 60 },
      ],
      ["a soak as long as the source's config asks for", record(), undefined, { soakMinutes: 30 }],
      // Signed records, where the reading stack trusts a key.
      ["a record signed with the trusted key", record({ signer: KEY }), undefined, { publicKey: KEY.publicKey }],
      [
        "an unsigned record where a key is trusted",
        record(),
        /is not signed, and records of staging are trusted only when signed with key SHA256:/,
        { publicKey: KEY.publicKey },
      ],
      [
        "a record signed with another key",
        record({ signer: OTHER_KEY }),
        new RegExp(`signed with another key \\(${escape(OTHER_KEY.keyId)}, as the record says\\)`),
        { publicKey: KEY.publicKey },
      ],
      [
        "a record signed with another key that claims the trusted key's id",
        record({ signer: OTHER_KEY, edit: (r) => (r.signature!.keyId = KEY.keyId) }),
        /signature that does not verify with the trusted key/,
        { publicKey: KEY.publicKey },
      ],
      [
        "a signature over another release, copied onto this record",
        record({
          signer: KEY,
          edit: (r) => (r.signature = record({ release: { ...R1, name: "r0" }, signer: KEY }).signature),
        }),
        /signature that does not verify with the trusted key/,
        { publicKey: KEY.publicKey },
      ],
      [
        "a signed record edited and resealed",
        record({
          signer: KEY,
          edit: (r) => ((r.converged.operations = 11), (r.recordDigest = recordDigestOf(r))),
        }),
        /signature that does not verify with the trusted key/,
        { publicKey: KEY.publicKey },
      ],
      ["a signed record where no key is trusted (a warning)", record({ signer: OTHER_KEY }), undefined, {}],
    ];
    for (const [what, r, want, trust] of rows)
      it(`${want ? "refuses" : "accepts"} ${what}`, () => {
        const p = verificationProblem(r, R1, "staging", trust);
        if (want === undefined) assert.equal(p, undefined);
        else assert.match(p ?? "", want);
      });

    it("warns about a record accepted without a trusted key, and not when a key checked it", () => {
      assert.match(verificationWarning(record(), "staging", {}) ?? "", /is not signed and no publicKey is configured/);
      assert.match(
        verificationWarning(record({ signer: KEY }), "staging", {}) ?? "",
        /signed with key SHA256:.*the signature was not checked/,
      );
      assert.equal(verificationWarning(record({ signer: KEY }), "staging", { publicKey: KEY.publicKey }), undefined);
    });

    it("sees the same record whatever the key order of its JSON text", () => {
      const r = record({ signer: KEY });
      const reordered = JSON.parse(JSON.stringify(r, Object.keys(flatKeys(r)).sort().reverse())) as VerificationRecord;
      assert.notEqual(JSON.stringify(reordered), JSON.stringify(r));
      assert.equal(verificationProblem(reordered, R1, "staging", { publicKey: KEY.publicKey }), undefined);
    });
  });

  describe("canonicalJson", () => {
    it("is one text whatever the key order, nested included", () =>
      assert.equal(
        canonicalJson({ b: 1, a: { d: [1, { y: 2, x: 1 }], c: "s" } }),
        canonicalJson({ a: { c: "s", d: [1, { x: 1, y: 2 }] }, b: 1 }),
      ));
    it("sorts by code units, never by locale, and keeps arrays in order", () =>
      assert.equal(canonicalJson({ é: 1, z: 2, B: 3, a: [3, 1] }), '{"B":3,"a":[3,1],"z":2,"é":1}'));
    it("leaves out keys whose value is undefined, as JSON does", () =>
      assert.equal(canonicalJson({ a: undefined, b: null }), '{"b":null}'));
    const refused: [string, unknown][] = [
      ["NaN", { a: NaN }],
      ["Infinity", [Infinity]],
      ["an undefined array element", [undefined]],
      ["a Date", { at: new Date(0) }],
      ["a Buffer", Buffer.from("x")],
      ["a bigint", 1n],
    ];
    for (const [what, v] of refused) it(`refuses ${what}`, () => assert.throws(() => canonicalJson(v), TypeError));
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
