// One rollout per stack: a lease in the backend's object store. A live run's lease is never
// taken; a dead run's (same machine) or an expired one (not renewed for its time to live, by
// the store's clock) is taken with one conditional write, and the taking is reported; a
// holder that cannot renew gives the lease up before anyone may take it.
import * as assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync, utimesSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { FileStore } from "../../orchestrator/backend/file";
import type { ObjectStore } from "../../orchestrator/backend/object-store";
import {
  acquireLock,
  ConcurrentRolloutError,
  lockKey,
  lossMarginMs,
  readLease,
  type HeldLock,
} from "../../orchestrator/lease/bucket";

const runnerA = { host: "runner-a", machine: "boot-a/pidns-a" };
const runnerB = { host: "runner-b", machine: "boot-b/pidns-b" };

/** Makes the stack's lease look `seconds` older (its current version's mtime), as if not renewed since. */
function age(dir: string, stack: string, seconds: number): void {
  const versions = join(dir, ...lockKey(stack).split("/")) + ".versions";
  const t = new Date(Date.now() - seconds * 1000);
  for (const v of readdirSync(versions).filter((n) => /^\d+$/.test(n))) utimesSync(join(versions, v), t, t);
}

describe("the rollout lock (a lease in the backend)", () => {
  let dir: string;
  let backend: string;
  const held: HeldLock[] = [];
  const take = async (stack: string, o: Parameters<typeof acquireLock>[3] = {}) => {
    const l = await acquireLock(backend, stack, "rollout", { ttlSeconds: 30, ...o });
    held.push(l);
    return l;
  };
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "molt-lock-"));
    backend = pathToFileURL(dir).href;
  });
  afterEach(async () => {
    for (const l of held.splice(0)) await l.release().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });

  it("lives next to the state, seen by every runner of the backend", async () => {
    const l = await take("prod");
    assert.equal(l.scope, "backend");
    assert.match(l.where, new RegExp(`\\.molt/locks/prod\\.json in ${dir}`));
    assert.equal((await readLease(new FileStore(dir), "prod"))?.holder.runId, l.holder.runId);
  });

  it("refuses a second run while the first holds the stack, and frees it on release", async () => {
    const first = await take("prod");
    await assert.rejects(
      take("prod"),
      (e: unknown) => e instanceof ConcurrentRolloutError && /pid \d+/.test((e as Error).message),
    );
    await assert.rejects(take("prod", { identity: runnerB }), /lease expires in \d+s \(30s after its last renewal\)/);
    await (await take("staging")).release(); // other stacks are independent
    await first.release();
    assert.equal(await readLease(new FileStore(dir), "prod"), undefined, "released: no live lease left");
    await (await take("prod")).release();
  });

  it("takes over the lease of a run that died on this machine at once, and reports it", async () => {
    const child = spawn(process.execPath, ["-e", ""]);
    const deadPid = child.pid!;
    await new Promise((r) => child.on("exit", r));
    await take("prod", { identity: { pid: deadPid } }); // its holder never releases it
    const l = await take("prod");
    assert.equal(l.recoveredFrom?.reason, "process-gone");
    assert.equal(l.recoveredFrom?.holder.pid, deadPid);
    assert.equal((await readLease(new FileStore(dir), "prod"))?.holder.pid, process.pid);
  });

  it("never takes another machine's lease before it expires, and takes it (reported) after", async () => {
    const a = await take("prod", { identity: runnerA });
    await assert.rejects(take("prod", { identity: runnerB }), ConcurrentRolloutError);
    age(dir, "prod", 29);
    await assert.rejects(take("prod", { identity: runnerB }), ConcurrentRolloutError, "29 s of 30: still live");
    age(dir, "prod", 31.5);
    const b = await take("prod", { identity: runnerB });
    assert.equal(b.recoveredFrom?.reason, "expired");
    assert.equal(b.recoveredFrom?.holder.runId, a.holder.runId);
    assert.ok(b.recoveredFrom!.silentSeconds! >= 31, `silent for ${b.recoveredFrom?.silentSeconds}s`);
  });

  it("lets exactly one of two runners take an expired lease", async () => {
    for (let round = 0; round < 10; round++) {
      const stack = `race${round}`;
      await take(stack, { identity: runnerA });
      age(dir, stack, 60);
      const results = await Promise.allSettled([
        take(stack, { identity: runnerB }),
        take(stack, { identity: { host: "runner-c", machine: "boot-c/pidns-c" } }),
      ]);
      assert.equal(results.filter((r) => r.status === "fulfilled").length, 1, `round ${round}: one winner`);
      const lost = results.find((r) => r.status === "rejected") as PromiseRejectedResult;
      assert.ok(lost.reason instanceof ConcurrentRolloutError, String(lost.reason));
    }
  });

  it("tells a holder whose lease was taken over that it lost it, at its next renewal", async () => {
    const a = await take("prod", { identity: runnerA, ttlSeconds: 3 });
    age(dir, "prod", 10);
    const b = await take("prod", { identity: runnerB, ttlSeconds: 3 });
    const e = await a.lost;
    assert.ok(a.signal.aborted);
    assert.match(e.message, new RegExp(`run ${b.holder.runId} \\(pid \\d+ on runner-b\\) took it over`));
    await a.release();
    assert.equal((await readLease(new FileStore(dir), "prod"))?.holder.runId, b.holder.runId, "b's lease stays");
  });

  it("renews while the run lives: another runner is refused long after the first acquisition", async function () {
    this.timeout(10_000);
    await take("prod", { identity: runnerA, ttlSeconds: 2 });
    await new Promise((r) => setTimeout(r, 4500)); // two time-to-lives: renewed in between
    await assert.rejects(take("prod", { identity: runnerB, ttlSeconds: 2 }), ConcurrentRolloutError);
  });

  it("keeps the lease when a renewal landed but its answer was lost", async function () {
    this.timeout(10_000);
    const real = new FileStore(dir);
    let drop = 1;
    const lossy: ObjectStore = Object.assign(Object.create(real) as FileStore, {
      putIfMatch: async (k: string, b: Buffer, e: string) => {
        const r = await real.putIfMatch(k, b, e);
        if (drop-- > 0) throw new Error("socket hang up");
        return r;
      },
    });
    const a = await acquireLock(backend, "prod", "rollout", { ttlSeconds: 3, store: lossy, identity: runnerA });
    held.push(a);
    await new Promise((r) => setTimeout(r, 4000)); // past the ttl: several renewals after the lost answer
    assert.equal(a.signal.aborted, false, String(a.signal.reason));
    await assert.rejects(take("prod", { identity: runnerB, ttlSeconds: 3 }), ConcurrentRolloutError);
  });

  it("gives the lease up before it expires when the store cannot be reached", async function () {
    this.timeout(10_000);
    const real = new FileStore(dir);
    let broken = false;
    const flaky: ObjectStore = Object.assign(Object.create(real) as FileStore, {
      putIfMatch: (k: string, b: Buffer, e: string) =>
        broken ? Promise.reject(new Error("ECONNREFUSED")) : real.putIfMatch(k, b, e),
    });
    const errors: string[] = [];
    const t0 = performance.now();
    const a = await acquireLock(backend, "prod", "rollout", {
      ttlSeconds: 3,
      store: flaky,
      onRenewError: (e) => errors.push(e.message),
    });
    held.push(a);
    broken = true;
    const e = await a.lost;
    const after = performance.now() - t0;
    assert.ok(after < 3000 - lossMarginMs(3) + 300, `lost after ${after} ms, before the ttl minus the margin`);
    assert.ok(after >= 3000 - lossMarginMs(3) - 50, `not before the deadline: ${after} ms`);
    assert.match(e.message, /could not be renewed for \d+s \(ECONNREFUSED\)/);
    assert.ok(errors.length >= 1, "the failed renewal was reported");
  });
});

describe("the lease when its store stops answering", () => {
  let dir: string;
  let backend: string;
  const held: HeldLock[] = [];
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "molt-lock-"));
    backend = pathToFileURL(dir).href;
  });
  afterEach(async () => {
    for (const l of held.splice(0)) await l.release().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });
  const take = async (o: Parameters<typeof acquireLock>[3]) => {
    const l = await acquireLock(backend, "prod", "rollout", { ttlSeconds: 3, ...o });
    held.push(l);
    return l;
  };
  const until = async (what: string, ok: () => boolean, ms = 5000) => {
    const end = performance.now() + ms;
    while (!ok()) {
      if (performance.now() > end) throw new Error(`${what}: not within ${ms} ms`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };

  it("abandons (aborts) a renewal that gets no answer by the time it gives the lease up", async function () {
    this.timeout(10_000);
    const real = new FileStore(dir);
    let hang = false;
    const signals: Array<AbortSignal | undefined> = [];
    const silent: ObjectStore = Object.assign(Object.create(real) as FileStore, {
      putIfMatch: (k: string, b: Buffer, e: string, c?: { signal?: AbortSignal }) => {
        if (!hang) return real.putIfMatch(k, b, e);
        signals.push(c?.signal);
        return new Promise<string | undefined>((_, reject) =>
          c?.signal?.addEventListener("abort", () => reject(new Error("aborted"))),
        );
      },
    });
    const a = await take({ store: silent, identity: runnerA });
    hang = true;
    await a.lost;
    assert.ok(signals.length >= 1, "a renewal was sent");
    assert.ok(
      signals.every((sig) => sig?.aborted),
      "every renewal in flight was aborted when the lease was given up",
    );
  });

  it("lets no renewal a frozen store processes after its holder gave up (and died) hold the stack", async function () {
    this.timeout(15_000);
    const real = new FileStore(dir);
    let frozen = false;
    const buffered: Array<() => void> = [];
    // A frozen server: what was sent is in its socket, and lands once it runs again, whatever the
    // writer did meanwhile; the writer sees no answer (and gives up when it aborts).
    const freezable: ObjectStore = Object.assign(Object.create(real) as FileStore, {
      putIfMatch: (k: string, b: Buffer, e: string, c?: { signal?: AbortSignal }) => {
        if (!frozen) return real.putIfMatch(k, b, e);
        return new Promise<string | undefined>((resolve, reject) => {
          buffered.push(() => void real.putIfMatch(k, b, e).then(resolve, reject));
          c?.signal?.addEventListener("abort", () => reject(new Error("aborted")));
        });
      },
    });
    const a = await take({ store: freezable, identity: runnerA });
    const frozenAt = performance.now();
    frozen = true;
    await a.lost; // a gives up; then it dies (never releases)
    await until("a renewal sent while frozen", () => buffered.length > 0);
    // Frozen for longer than the lease: every renewal a sent before it gave up is still buffered.
    await until("frozen past the ttl", () => performance.now() - frozenAt > 3200);
    frozen = false;
    for (const land of buffered.splice(0)) land(); // the file store writes at once
    const lease = await readLease(new FileStore(dir), "prod");
    assert.equal(lease?.holder.runId, a.holder.runId, "a's late renewal landed: the record names a");
    const t0 = performance.now();
    const b = await take({ identity: runnerB });
    assert.equal(b.recoveredFrom?.reason, "expired");
    assert.equal(b.recoveredFrom?.holder.runId, a.holder.runId);
    assert.ok(performance.now() - t0 < 1000, "taken at the first try, not one more lease period later");
  });

  it("removes its lease on release although a renewal in flight landed first", async function () {
    this.timeout(10_000);
    const real = new FileStore(dir);
    let slow = false;
    let inFlight = 0;
    // The write lands at once; its answer never comes (the writer aborts it).
    const lossy: ObjectStore = Object.assign(Object.create(real) as FileStore, {
      putIfMatch: async (k: string, b: Buffer, e: string, c?: { signal?: AbortSignal }) => {
        const r = await real.putIfMatch(k, b, e);
        if (!slow) return r;
        inFlight++;
        return new Promise<string | undefined>((_, reject) =>
          c?.signal?.addEventListener("abort", () => reject(new Error("aborted"))),
        );
      },
    });
    const a = await take({ store: lossy, identity: runnerA });
    slow = true;
    await until("a renewal in flight", () => inFlight > 0);
    await a.release();
    assert.equal(await readLease(new FileStore(dir), "prod"), undefined, "released: no lease left");
    await take({ identity: runnerB });
  });

  it("removes its own lease when it releases after it lost it (the store answers again)", async function () {
    this.timeout(10_000);
    const real = new FileStore(dir);
    let broken = false;
    const flaky: ObjectStore = Object.assign(Object.create(real) as FileStore, {
      putIfMatch: (k: string, b: Buffer, e: string) =>
        broken ? Promise.reject(new Error("ECONNREFUSED")) : real.putIfMatch(k, b, e),
    });
    const a = await take({ store: flaky, identity: runnerA });
    broken = true;
    await a.lost;
    broken = false;
    await a.release();
    assert.equal(await readLease(new FileStore(dir), "prod"), undefined, "no record of a dead lease left behind");
  });
});

describe("the file backend's object store", () => {
  let dir: string;
  let s: FileStore;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "molt-store-"));
    s = new FileStore(dir);
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("writes conditionally: absent, then only on the version read", async () => {
    const e1 = await s.putIfAbsent("a/b.json", Buffer.from("1"));
    assert.ok(e1);
    assert.equal(await s.putIfAbsent("a/b.json", Buffer.from("2")), undefined);
    const e2 = await s.putIfMatch("a/b.json", Buffer.from("3"), e1);
    assert.ok(e2);
    assert.equal(await s.putIfMatch("a/b.json", Buffer.from("4"), e1), undefined, "a stale version is refused");
    assert.equal((await s.get("a/b.json"))?.body.toString(), "3");
    assert.equal(await s.delete("a/b.json", e1), false);
    assert.equal(await s.delete("a/b.json", e2), true);
    assert.equal(await s.get("a/b.json"), undefined);
    assert.ok(await s.putIfAbsent("a/b.json", Buffer.from("5")), "a deleted key can be written again");
    assert.deepEqual(await s.list("a/"), ["a/b.json"]);
  });

  it("never lets a slow writer's recreated old version count as a write", async () => {
    const e1 = (await s.putIfAbsent("k", Buffer.from("1")))!;
    const e2 = (await s.putIfMatch("k", Buffer.from("2"), e1))!;
    await s.putIfMatch("k", Buffer.from("3"), e2); // version 1 and 2 are cleaned up now
    // A writer that read version 1 long ago and only now writes version 2 again:
    assert.equal(await s.putIfMatch("k", Buffer.from("late"), e1), undefined);
    assert.equal((await s.get("k"))?.body.toString(), "3");
  });

  it("lets exactly one of many concurrent writers win each version", async () => {
    const e1 = (await s.putIfAbsent("k", Buffer.from("0")))!;
    const wins = await Promise.all(Array.from({ length: 20 }, (_, i) => s.putIfMatch("k", Buffer.from(`${i}`), e1)));
    assert.equal(wins.filter(Boolean).length, 1);
  });

  it("refuses a backend folder that does not exist (and does not create it)", async () => {
    await assert.rejects(new FileStore(join(dir, "nope")).check(), /the folder .*nope does not exist/);
  });
});
