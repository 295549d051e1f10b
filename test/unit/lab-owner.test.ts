// One lab, one stack (infra/lab/owner.ts): the claim is atomic, another stack is refused
// with the owner named and how to release it, a claim of a stack that holds nothing any more
// is taken over, and the load balancer's delete never stops what another stack uses.
import * as assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { createLb, removeLb } from "../../infra/lab/lb-impl";
import type { LabLbInputs } from "../../infra/lab/lb";
import {
  claimLab,
  labOwner,
  LabOwnedError,
  ownerFile,
  readLabClaim,
  releaseLab,
  type LabOwner,
} from "../../infra/lab/owner";

describe("lab ownership (infra/lab/owner.ts)", () => {
  let root: string;
  const LAB = "hy";
  // Backends a claim cannot be checked against from here: the claim stands.
  const A: LabOwner = labOwner("alpha", "s3://state-bucket/molt?region=eu-central-1&endpoint=http://x");
  const B: LabOwner = labOwner("beta", "s3://state-bucket/molt");

  beforeEach(() => (root = mkdtempSync(join(tmpdir(), "molt-lab-owner-"))));
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  const claimText = () => readFileSync(ownerFile(root, LAB), "utf8");

  it("names the owner by stack and backend, without credentials or query", () => {
    assert.deepEqual(labOwner("prod", "s3://AKIA:secret@bucket/p?region=x"), {
      stack: "prod",
      backend: "s3://bucket/p",
    });
    assert.deepEqual(labOwner("lab", "file:///root/.molt/state/?metadata=skip"), {
      stack: "lab",
      backend: "file:///root/.molt/state",
    });
  });

  it("claims a free lab, and confirms its own claim", () => {
    assert.deepEqual(claimLab(root, LAB, A), { claimed: "now" });
    const c = readLabClaim(root, LAB)!;
    assert.equal(c.stack, "alpha");
    assert.equal(c.backend, "s3://state-bucket/molt");
    assert.deepEqual(claimLab(root, LAB, A), { claimed: "already" });
  });

  it("refuses another stack, naming the owner and how to release the lab; the claim stays", () => {
    claimLab(root, LAB, A);
    const before = claimText();
    assert.throws(
      () => claimLab(root, LAB, B),
      (e: Error) =>
        e instanceof LabOwnedError &&
        e.name === "LabOwnedError" &&
        /^lab hy belongs to stack alpha \(backend s3:\/\/state-bucket\/molt, claimed /.test(e.message) &&
        /stack beta may not use it, and nothing was changed/.test(e.message) &&
        /Give stack beta a lab of its own \(molt:lab\.name/.test(e.message) &&
        /destroy stack alpha \(PULUMI_BACKEND_URL=s3:\/\/state-bucket\/molt npm run pulumi -- destroy --stack alpha\)/.test(
          e.message,
        ) &&
        /tools\/lab\/clean\.sh hy/.test(e.message),
    );
    assert.equal(claimText(), before);
  });

  it("refuses the same stack name in another backend", () => {
    claimLab(root, LAB, labOwner("lab", "file:///srv/state-a"));
    assert.throws(
      () => claimLab(root, LAB, labOwner("lab", "s3://b/x"), () => false),
      (e: Error) => e instanceof LabOwnedError && /stack lab \(backend s3:\/\/b\/x\) may not use it/.test(e.message),
    );
  });

  describe("a claim of a stack that holds nothing any more (file backends on this host)", () => {
    const checkpoint = (backend: string, stack: string, resources: { type: string }[]) => {
      const dir = join(backend, ".pulumi", "stacks", "molt");
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, `${stack}.json`), JSON.stringify({ checkpoint: { latest: { resources } } }));
    };

    it("is taken over when the owner's backend folder is gone", () => {
      claimLab(root, LAB, labOwner("alpha", `file://${join(root, "no-such-backend")}`));
      const r = claimLab(root, LAB, B);
      assert.equal(r.claimed, "taken-over");
      assert.equal(r.previous?.stack, "alpha");
      assert.equal(readLabClaim(root, LAB)?.stack, "beta");
    });

    it("is taken over when the owner's stack was destroyed (its record only left), not while it has resources", () => {
      const backend = join(root, "state");
      const alpha = labOwner("alpha", `file://${backend}`);
      checkpoint(backend, "alpha", [{ type: "pulumi:pulumi:Stack" }, { type: "pulumi-nodejs:dynamic:Resource" }]);
      claimLab(root, LAB, alpha);
      assert.throws(() => claimLab(root, LAB, B), LabOwnedError);
      checkpoint(backend, "alpha", [{ type: "pulumi:pulumi:Stack" }]);
      assert.equal(claimLab(root, LAB, B).claimed, "taken-over");
    });
  });

  it("of several stacks claiming a free lab at once, exactly one wins", async () => {
    const owner = resolve(__dirname, "../../infra/lab/owner.js");
    const script = (i: number) =>
      `try { require(${JSON.stringify(owner)}).claimLab(${JSON.stringify(root)}, "race", ` +
      `{ stack: "s${i}", backend: "s3://b/x" }); console.log("won") } ` +
      `catch (e) { if (e.name !== "LabOwnedError") throw e; console.log("refused") }`;
    const runs = await Promise.all(
      Array.from({ length: 8 }, (_, i) => promisify(execFile)(process.execPath, ["-e", script(i)])),
    );
    const outcomes = runs.map((r) => r.stdout.trim()).sort();
    assert.deepEqual(outcomes, ["refused", "refused", "refused", "refused", "refused", "refused", "refused", "won"]);
    const winner = readLabClaim(root, "race")!.stack;
    assert.match(winner, /^s\d$/);
  });

  it("is released by its owner only", () => {
    claimLab(root, LAB, A);
    assert.equal(releaseLab(root, LAB, B), false);
    assert.equal(readLabClaim(root, LAB)?.stack, "alpha");
    assert.equal(releaseLab(root, LAB, A), true);
    assert.equal(existsSync(ownerFile(root, LAB)), false);
  });

  describe("the lab's load balancer (infra/lab/lb-impl.ts)", () => {
    const lb = (owner?: LabOwner): LabLbInputs => ({
      lab: LAB,
      labRoot: root,
      bridge: "moltbr-x",
      subnet: "10.77.250.0/24",
      port: 6443,
      ...(owner ? { owner } : {}),
    });
    const lbDir = () => join(root, "labs", LAB, "lb");
    /** A load balancer as createLb leaves it (no HAProxy process in a unit test), with servers attached. */
    const made = (...servers: string[]) => {
      mkdirSync(join(lbDir(), "servers"), { recursive: true });
      writeFileSync(join(lbDir(), "haproxy.cfg"), "global\n");
      for (const s of servers) writeFileSync(join(lbDir(), "servers", s), "10.77.250.10:6443");
    };

    it("is not created for a stack whose lab another stack owns", async () => {
      claimLab(root, LAB, A);
      await assert.rejects(createLb(lb(B)), LabOwnedError);
      assert.equal(existsSync(lbDir()), false, "nothing made");
    });

    it("a destroy of another stack leaves the owner's load balancer and claim alone", async () => {
      claimLab(root, LAB, A);
      made("alpha-cp-1", "alpha-cp-2", "alpha-cp-3");
      assert.deepEqual(await removeLb(lb(B)), { kept: `lab hy belongs to stack alpha (s3://state-bucket/molt)` });
      assert.ok(existsSync(join(lbDir(), "haproxy.cfg")));
      assert.equal(readLabClaim(root, LAB)?.stack, "alpha");
    });

    it("one from before claims, in a claimed lab, stays while another stack's servers are attached", async () => {
      claimLab(root, LAB, A);
      made("alpha-cp-1");
      assert.match((await removeLb(lb())).kept ?? "", /servers of another stack are still attached: alpha-cp-1/);
      assert.ok(existsSync(join(lbDir(), "haproxy.cfg")));
    });

    it("the owner's destroy removes it and releases the lab", async () => {
      claimLab(root, LAB, A);
      made();
      assert.deepEqual(await removeLb(lb(A)), {});
      assert.equal(existsSync(lbDir()), false);
      assert.equal(readLabClaim(root, LAB), undefined);
    });

    it("one made outside molt's stacks (an adopted cluster's, nothing claimed) goes as before", async () => {
      made("legacy-etcd-a");
      assert.deepEqual(await removeLb(lb()), {});
      assert.equal(existsSync(lbDir()), false);
    });
  });
});
