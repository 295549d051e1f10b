// One rollout per stack: a live run's lock is never taken, a dead run's is.
import * as assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { acquireLock, ConcurrentRolloutError, lockDir } from "../../orchestrator/lock";

describe("the rollout lock", () => {
  let dir: string;
  let backend: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "molt-lock-"));
    backend = pathToFileURL(dir).href;
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("lives next to the state of a file backend", () => {
    assert.equal(lockDir(backend), join(dir, ".molt", "locks"));
  });

  it("refuses a second run while the first holds the stack, and frees it on release", () => {
    const first = acquireLock(backend, "prod", "rollout");
    assert.throws(
      () => acquireLock(backend, "prod", "rollout"),
      (e: unknown) => e instanceof ConcurrentRolloutError && /pid \d+/.test((e as Error).message),
    );
    assert.doesNotThrow(() => acquireLock(backend, "staging", "rollout").release(), "other stacks are independent");
    first.release();
    acquireLock(backend, "prod", "rollout").release();
  });

  it("takes over the lock of a run that died on this host, and reports it", async () => {
    const child = spawn(process.execPath, ["-e", ""]);
    const deadPid = child.pid!;
    await new Promise((r) => child.on("exit", r));
    const path = join(lockDir(backend), "prod.json");
    acquireLock(backend, "prod", "rollout").release();
    writeFileSync(path, JSON.stringify({ pid: deadPid, host: hostname(), startedAt: "earlier", command: "rollout" }));
    const lock = acquireLock(backend, "prod", "rollout");
    assert.equal(lock.recoveredFrom?.pid, deadPid);
    assert.equal(JSON.parse(readFileSync(path, "utf8")).pid, process.pid);
    assert.deepEqual(
      readdirSync(lockDir(backend)),
      ["prod.json"],
      "the dead run's lock is gone (the event reports it), only ours is left",
    );
    lock.release();
  });

  it("never takes a lock held by a live process or by another host", () => {
    const path = join(lockDir(backend), "prod.json");
    acquireLock(backend, "prod", "rollout").release();
    writeFileSync(path, JSON.stringify({ pid: process.ppid, host: hostname(), startedAt: "now", command: "rollout" }));
    assert.throws(() => acquireLock(backend, "prod", "rollout"), ConcurrentRolloutError);
    writeFileSync(path, JSON.stringify({ pid: 999999, host: "another-runner", startedAt: "now", command: "rollout" }));
    assert.throws(() => acquireLock(backend, "prod", "rollout"), /If that run is certainly dead, remove/);
    assert.equal(JSON.parse(readFileSync(path, "utf8")).host, "another-runner", "the lock was left as it was");
  });
});
