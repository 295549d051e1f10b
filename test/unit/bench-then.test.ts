// The earlier commit's SSH commands during its upgrade, from the lines bench/then-trace.ts wrote.
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { extractCommit, linkToolchain, upgradeSshOf } from "../../bench/then";
import type { ThenTraceLine } from "../../bench/then-trace";

describe("bench then: SSH commands of the upgrade", () => {
  const exec = (process: string, at: number, ms: number): ThenTraceLine => ({ kind: "exec", process, at, ms });

  it("counts only the commands within the last rollout, by process", () => {
    const trace: ThenTraceLine[] = [
      exec("bench/run.js", 50, 999), // the create rollout's
      { kind: "rollout", start: 0, end: 100 },
      exec("bench/run.js", 150, 300),
      exec("dynamic-provider/index.js", 160, 500),
      exec("bench/run.js", 170, 100),
      exec("bench/run.js", 180, 200),
      { kind: "rollout", start: 120, end: 200 },
      exec("bench/run.js", 250, 999), // after the upgrade: the bench's own reads
    ];
    assert.deepEqual(upgradeSshOf(trace), {
      "bench/run.js": { count: 3, msTotal: 600, msMedian: 200 },
      "dynamic-provider/index.js": { count: 1, msTotal: 500, msMedian: 500 },
    });
  });

  it("says nothing when no rollout ended (a run that failed before its upgrade)", () => {
    assert.deepEqual(upgradeSshOf([exec("bench/run.js", 1, 1)]), {});
  });
});

describe("bench then: its checkout and toolchain", () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), "molt-bench-then-"))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const git = (cwd: string, ...args: string[]) => {
    const r = spawnSync("git", args, { cwd, encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    return r.stdout.trim();
  };

  it("extracts a commit's tree with git archive | tar", () => {
    const repo = join(dir, "repo");
    mkdirSync(repo);
    git(repo, "init", "-q");
    writeFileSync(join(repo, "a.txt"), "then\n");
    git(repo, "add", "a.txt");
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c");
    const commit = git(repo, "rev-parse", "HEAD");
    const out = join(dir, "out");
    mkdirSync(out);
    extractCommit(repo, commit, out);
    assert.equal(readFileSync(join(out, "a.txt"), "utf8"), "then\n");
  });

  it("a git archive that fails fails the checkout, though tar read a whole archive (pipefail)", () => {
    // A git that writes a good archive and then exits 1: without pipefail tar's 0 is the pipe's.
    const bin = join(dir, "bin");
    mkdirSync(bin);
    const src = join(dir, "src");
    mkdirSync(src);
    writeFileSync(join(src, "a.txt"), "partial\n");
    const tarball = join(dir, "a.tar");
    assert.equal(spawnSync("tar", ["-cf", tarball, "-C", src, "a.txt"]).status, 0);
    writeFileSync(join(bin, "git"), `#!/bin/sh\ncat '${tarball}'\necho 'fatal: bad object' >&2\nexit 1\n`);
    chmodSync(join(bin, "git"), 0o755);
    const out = join(dir, "out");
    mkdirSync(out);
    assert.throws(
      () => extractCommit(dir, "0000000", out, { ...process.env, PATH: `${bin}:${process.env.PATH}` }),
      /bench then: git archive failed \(1\): fatal: bad object/,
    );
    assert.ok(existsSync(join(out, "a.txt")), "tar did extract: only pipefail tells the failure");
  });

  it("links the shared toolchain's entries, keeps what is there, replaces a dangling link", () => {
    const shared = join(dir, "shared");
    const toolchain = join(dir, "toolchain");
    mkdirSync(shared);
    mkdirSync(toolchain);
    for (const e of ["kube-1.36", "etcd-3.6", "lab-kubelet-current", "own", "good"]) mkdirSync(join(shared, e));
    // A dangling link (its target moved): existsSync says no entry, symlinkSync would say EEXIST.
    symlinkSync(join(dir, "gone", "etcd-3.6"), join(toolchain, "etcd-3.6"));
    mkdirSync(join(toolchain, "own")); // its own build: kept
    symlinkSync(join(shared, "good"), join(toolchain, "good")); // a link that resolves: kept
    assert.deepEqual(linkToolchain(shared, toolchain).sort(), ["etcd-3.6", "kube-1.36"]);
    assert.equal(readlinkSync(join(toolchain, "etcd-3.6")), join(shared, "etcd-3.6"));
    assert.equal(readlinkSync(join(toolchain, "kube-1.36")), join(shared, "kube-1.36"));
    assert.ok(lstatSync(join(toolchain, "own")).isDirectory());
    assert.ok(!existsSync(join(toolchain, "lab-kubelet-current")), "lab-kubelet-current is its own build's");
    // Again: nothing to do.
    assert.deepEqual(linkToolchain(shared, toolchain), []);
  });
});
