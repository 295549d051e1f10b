// The cluster's ownership marker (core/ownership.ts): the marker's format, the backend as it
// names an owner, adoption's claim (orchestrator/adopt/ownership.ts) and `molt disown`
// (orchestrator/disown.ts) over the fake etcd. The planner's rows are in plan.test.ts, the
// loop's in loop.test.ts.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { AdoptionRefusedError } from "../../orchestrator/adopt";
import { claimForAdoption } from "../../orchestrator/adopt/ownership";
import { ownerBackend } from "../../orchestrator/backend/store";
import {
  ownerMarkerJson,
  parseOwnerMarker,
  type ClusterOwner,
  type OwnerMarker,
} from "../../orchestrator/core/ownership";
import { disown, DisownRefusedError } from "../../orchestrator/disown";
import { fakeEdges, fakeEtcd, FakeWorld } from "../support/fake-edges";

const SELF: ClusterOwner = { stack: "lab", backend: "s3://state/molt" };
const marker = (stack: string, backend = SELF.backend, by: OwnerMarker["by"] = "adopt"): string =>
  ownerMarkerJson({ stack, backend, claimedAt: "2026-01-02T03:04:05.000Z", by });
const refuse = (...problems: string[]): never => {
  throw new AdoptionRefusedError("lab", problems);
};

describe("the cluster's ownership marker", () => {
  describe("its format", () => {
    it("round-trips the fields molt writes", () => {
      const m: OwnerMarker = { stack: "prod", backend: "s3://b", claimedAt: "2026-01-01T00:00:00.000Z", by: "rollout" };
      assert.deepEqual(parseOwnerMarker(ownerMarkerJson(m)), m);
    });
    const bad: [string, RegExp][] = [
      ["prod", /not valid JSON \("prod"\)/],
      ["[1]", /not a JSON object/],
      ["null", /not a JSON object/],
      ['{"stack":"prod","backend":"","claimedAt":"x","by":"adopt"}', /no backend/],
      ['{"stack":"prod","backend":"s3://b","claimedAt":"x"}', /"by" is undefined/],
    ];
    for (const [value, why] of bad)
      it(`is not a marker: ${value}`, () => {
        const r = parseOwnerMarker(value);
        assert.ok("invalid" in r);
        assert.match(r.invalid, why);
      });
  });

  describe("the backend as it names an owner: no credentials, no query", () => {
    const rows: [string, string][] = [
      [
        "s3://AKIAEXAMPLE:s3cr3t@state-bucket/molt?region=eu-central-1&endpoint=https://minio:9000",
        "s3://state-bucket/molt",
      ],
      ["azblob://state?storage_account=acct&sig=SECRETSAS", "azblob://state"],
      ["https://user:token@api.pulumi.com/", "https://api.pulumi.com"],
      ["file:///home/ops/.molt/state/", "file:///home/ops/.molt/state"],
      ["gs://bucket#frag", "gs://bucket"],
      ["file:///", "file:///"],
    ];
    for (const [url, want] of rows)
      it(`${url} -> ${want}`, () => {
        assert.equal(ownerBackend(url), want);
        assert.doesNotMatch(ownerBackend(url), /s3cr3t|SECRETSAS|token|AKIA/);
      });
  });

  describe("adoption's claim (adopt/ownership.ts)", () => {
    it("claims a cluster without a marker, naming the stack and its backend, by adopt", async () => {
      const w = FakeWorld.cluster(3, "lab-v1");
      const c = await claimForAdoption(fakeEtcd(w), { self: SELF }, refuse, () => new Date("2026-02-03T00:00:00Z"));
      assert.match(c.detail, /claimed for stack lab \(backend s3:\/\/state\/molt\)/);
      assert.deepEqual(parseOwnerMarker(w.owner!.value), {
        ...SELF,
        claimedAt: "2026-02-03T00:00:00.000Z",
        by: "adopt",
      });
      assert.deepEqual(w.log, [`etcd writeOwner ${w.owner!.value}`], "written where the key is absent only");
    });

    it("its own marker: nothing is written", async () => {
      const w = FakeWorld.cluster(3, "lab-v1");
      w.setOwner(marker("lab"));
      const c = await claimForAdoption(fakeEtcd(w), { self: SELF }, refuse);
      assert.match(c.detail, /already owned by stack lab/);
      assert.deepEqual(w.log, []);
    });

    it("refuses a cluster another stack owns, naming it and the ways out; nothing is written", async () => {
      const w = FakeWorld.cluster(3, "lab-v1");
      w.setOwner(marker("prod", "s3://prod-state"));
      const before = { ...w.owner! };
      await assert.rejects(claimForAdoption(fakeEtcd(w), { self: SELF }, refuse), (e: Error) => {
        assert.ok(e instanceof AdoptionRefusedError);
        assert.match(e.message, /owned by stack prod \(backend s3:\/\/prod-state\), claimed by molt adopt at/);
        assert.match(e.message, /`molt disown --stack prod`/);
        assert.match(e.message, /add `--take-over prod` to this command/);
        return true;
      });
      assert.deepEqual(w.owner, before);
      assert.deepEqual(w.log, []);
    });

    it("--take-over naming the owner replaces its marker (if unchanged); undo puts it back", async () => {
      const w = FakeWorld.cluster(3, "lab-v1");
      w.setOwner(marker("gone", "s3://old"));
      const old = { ...w.owner! };
      const c = await claimForAdoption(fakeEtcd(w), { self: SELF, takeOver: "gone" }, refuse);
      assert.match(c.detail, /taken over from stack gone \(backend s3:\/\/old\)/);
      assert.ok(w.log[0].endsWith(`if revision ${old.revision}`), w.log[0]);
      assert.equal(JSON.parse(w.owner!.value).stack, "lab");
      await c.undo();
      assert.equal(w.owner!.value, old.value, "the previous owner's marker is back");
    });

    it("undo of a claim removes the marker it wrote, and only that one", async () => {
      const w = FakeWorld.cluster(3, "lab-v1");
      const c = await claimForAdoption(fakeEtcd(w), { self: SELF }, refuse);
      await c.undo();
      assert.equal(w.owner, undefined);
      const d = await claimForAdoption(fakeEtcd(w), { self: SELF }, refuse);
      w.setOwner(marker("other")); // claimed by another after this one
      await d.undo();
      assert.equal(JSON.parse(w.owner!.value).stack, "other", "another's marker is left alone");
    });

    it("a claim that lands second is refused, naming the stack that won", async () => {
      const w = FakeWorld.cluster(3, "lab-v1");
      w.faults.ownerClaimedFirst = marker("rival", "s3://rival");
      await assert.rejects(
        claimForAdoption(fakeEtcd(w), { self: SELF }, refuse),
        /ownership changed while this adoption ran: the cluster is owned by stack rival \(backend s3:\/\/rival\)/,
      );
      assert.equal(JSON.parse(w.owner!.value).stack, "rival");
    });

    const badInput: [string, (w: FakeWorld) => void, string | undefined, RegExp][] = [
      [
        "--take-over naming another stack",
        (w) => w.setOwner(marker("prod")),
        "prd",
        /--take-over prd does not name it/,
      ],
      ["--take-over with no marker", () => undefined, "prod", /--take-over prod: the cluster has no ownership marker/],
      [
        "a marker that is not valid JSON",
        (w) => w.setOwner("{oops"),
        undefined,
        /not valid JSON.*etcdctl get \/molt\/owner.*, then run this command again$/,
      ],
      ["--take-over of a marker that is not JSON", (w) => w.setOwner("{oops"), "prod", /not valid JSON/],
      [
        "a marker that cannot be read",
        (w) => (w.faults.ownerReadFails = true),
        undefined,
        /ownership marker cannot be read: reading the ownership marker failed/,
      ],
    ];
    for (const [what, set, takeOver, why] of badInput)
      it(`bad input, refused and nothing written: ${what}`, async () => {
        const w = FakeWorld.cluster(3, "lab-v1");
        set(w);
        const before = w.owner && { ...w.owner };
        await assert.rejects(
          claimForAdoption(fakeEtcd(w), { self: SELF, ...(takeOver ? { takeOver } : {}) }, refuse),
          (e: Error) => e instanceof AdoptionRefusedError && why.test(e.message),
        );
        assert.deepEqual(w.owner, before);
        assert.deepEqual(w.log, []);
      });
  });

  describe("molt disown (orchestrator/disown.ts)", () => {
    let dir: string;
    let env: Record<string, string>;
    const saved = process.env.MOLT_HOME;
    before(() => {
      dir = mkdtempSync(join(tmpdir(), "molt-disown-"));
      mkdirSync(join(dir, "lab", "images", "lab-v1"), { recursive: true });
      writeFileSync(join(dir, "lab", "images", "lab-v1", "image.json"), JSON.stringify({ name: "lab-v1" }));
      mkdirSync(join(dir, "backend"));
      mkdirSync(join(dir, "stacks"));
      writeFileSync(
        join(dir, "stacks", "Pulumi.lab.yaml"),
        stringify({
          config: {
            "molt:provider": "lab",
            "molt:replicas": 3,
            "molt:image": "lab-v1",
            "molt:lab": { name: "disown", root: join(dir, "lab") },
          },
        }),
      );
      env = { PULUMI_BACKEND_URL: `file://${join(dir, "backend")}` };
      process.env.MOLT_HOME = join(dir, "home");
    });
    after(() => {
      if (saved === undefined) delete process.env.MOLT_HOME;
      else process.env.MOLT_HOME = saved;
      rmSync(dir, { recursive: true, force: true });
    });
    const run = (w: FakeWorld) => disown({ stack: "lab", workDir: dir, env, edges: fakeEdges(w) });
    const own = () => marker("lab", env.PULUMI_BACKEND_URL, "rollout");

    it("removes the marker naming this stack with its backend, and says so", async () => {
      const w = FakeWorld.cluster(3, "lab-v1");
      w.setOwner(own());
      const revision = w.owner!.revision;
      const r = await run(w);
      assert.equal(r.result, "released");
      assert.match(r.message, /removed the cluster's ownership marker naming stack lab \(backend file:\/\//);
      assert.equal(w.owner, undefined);
      assert.deepEqual(w.log, [`etcd removeOwner if revision ${revision}`]);
    });

    it("no marker: nothing to release, nothing changed (a rerun is no error)", async () => {
      const w = FakeWorld.cluster(3, "lab-v1");
      const r = await run(w);
      assert.equal(r.result, "nothing");
      assert.match(r.message, /no ownership marker: no stack owns it, nothing to release; nothing was changed/);
      assert.deepEqual(w.log, []);
    });

    const refused: [string, string, RegExp][] = [
      [
        "another stack's marker",
        marker("prod"),
        /owned by stack prod \(backend s3:\/\/state\/molt\).*`molt disown --stack prod`/,
      ],
      [
        "this stack's name in another backend",
        marker("lab", "s3://elsewhere"),
        /owned by stack lab \(backend s3:\/\/elsewhere\)/,
      ],
      [
        "a marker that is not valid JSON",
        "lab owns this",
        /not valid JSON \("lab owns this"\).*etcdctl get \/molt\/owner/,
      ],
    ];
    for (const [what, value, why] of refused)
      it(`bad input, refused (exit 2) and nothing changed: ${what}`, async () => {
        const w = FakeWorld.cluster(3, "lab-v1");
        w.setOwner(value);
        const before = { ...w.owner! };
        await assert.rejects(run(w), (e: Error) => e instanceof DisownRefusedError && why.test(e.message));
        assert.deepEqual(w.owner, before);
        assert.deepEqual(w.log, []);
      });

    it("refused when the marker changed between its read and its removal", async () => {
      const w = FakeWorld.cluster(3, "lab-v1");
      w.setOwner(own());
      const edges = fakeEdges(w);
      const racing: typeof edges = async (o) => {
        const e = await edges(o);
        const etcd = await e.nodes.etcd();
        const remove = etcd.removeOwner.bind(etcd);
        // Another run of this stack claims it again between the read and the delete.
        etcd.removeOwner = async (revision) => {
          w.setOwner(own());
          return remove(revision);
        };
        return e;
      };
      await assert.rejects(
        disown({ stack: "lab", workDir: dir, env, edges: racing }),
        /marker changed while it was being removed .*; nothing was removed/,
      );
      assert.ok(w.owner, "the new marker stays");
    });

    it("a marker that cannot be read: refused, nothing changed", async () => {
      const w = FakeWorld.cluster(3, "lab-v1");
      w.setOwner(own());
      w.faults.ownerReadFails = true;
      await assert.rejects(
        run(w),
        (e: Error) => e instanceof DisownRefusedError && /could not be read/.test(e.message),
      );
      assert.ok(w.owner);
      assert.deepEqual(w.log, []);
    });

    it("a stack without nodes cannot reach a cluster: refused, pointing at --take-over", async () => {
      const w = new FakeWorld();
      await assert.rejects(run(w), /stack lab has no node, .*--take-over lab/);
    });
  });
});
