// A shared store that stops answering while a runner holds the stack's lease (s3-store and
// azblob-store integration tests): the server is frozen with SIGSTOP, so the kernel still
// accepts connections and buffers what runners send, and processes it all once SIGCONT comes.
//  - "dies": runner A (another process, ttl 4 s) holds the lease; the server is frozen; runner
//    B, started during the outage, must fail with a BackendError within the store's deadline
//    (and keeps trying, as a second runner waiting for the stack does); A gives the lease up
//    and is SIGKILLed while the server is still frozen, a renewal of its own in flight; the
//    server runs again; B must take the stack over at once, whatever A's late renewal did.
//  - "releases": A gives the lease up during the freeze and releases it (its delete in flight
//    beside its abandoned renewal); once the server runs again the stack is free, no record left.
// Returns the figures the caller asserts on and prints.
import * as assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { openStore } from "../../orchestrator/backend/store";
import { STORE_CALL_MS } from "../../orchestrator/backend/object-store";
import { BackendError } from "../../orchestrator/stack/driver";
import {
  acquireLock,
  ConcurrentRolloutError,
  lossMarginMs,
  readLease,
  type HeldLock,
} from "../../orchestrator/lease/bucket";
import { distDir } from "../../orchestrator/stack/engine";

export interface Freezable {
  /** SIGSTOP: the server answers nothing, its kernel still buffers what is sent. */
  freeze(): void;
  /** SIGCONT. */
  thaw(): void;
}

export const OUTAGE_TTL_SECONDS = 4;

export interface DiesFigures {
  /** A run started right after the freeze: how long until it failed, and with what. */
  startedDuringOutage: { ms: number; error: string };
  /** From the freeze until A gave the lease up (its deadline: ttl - margin after its last answered renewal). */
  gaveUpMs: number;
  frozenMs: number;
  /** A renewal A sent during the freeze landed after the thaw, before B read the lease. */
  lateRenewalSeen: boolean;
  /** From the thaw until B held the stack; and from A's death. */
  takeoverAfterThawMs: number;
  takeoverAfterDeathMs: number;
  /** B's attempts refused as "another run holds it" after the thaw (each names A). */
  refusedAfterThaw: number;
  b: HeldLock;
  aRunId: string;
}

export interface ReleasesFigures {
  gaveUpMs: number;
  /** From the thaw until A's release had removed its lease. */
  releasedAfterThawMs: number;
  b: HeldLock;
}

const t = () => performance.now();

/** Runner A: another process holding the lease; says when it holds, loses and released it. */
function runnerA(url: string, env: Record<string, string | undefined>, release: boolean) {
  const child: ChildProcess = spawn(
    process.execPath,
    [
      "-e",
      `const lock = require(${JSON.stringify(join(distDir, "orchestrator", "lease", "bucket.js"))});
       lock.acquireLock(process.env.URL, "outage", "rollout",
          { ttlSeconds: ${OUTAGE_TTL_SECONDS}, identity: { host: "runner-a", machine: "a" } })
        .then((l) => {
          console.log("held " + l.holder.runId);
          l.lost.then((e) => {
            console.log("lost " + e.message);
            if (!${release}) return;
            console.log("releasing");
            l.release().then(() => console.log("released"), (e) => console.log("release-failed " + e.message));
          });
          setInterval(() => {}, 1000);
        }, (e) => { console.log("failed " + e.message); process.exit(1); });`,
    ],
    { env: { ...process.env, ...env, URL: url }, stdio: ["ignore", "pipe", "inherit"] },
  );
  const seen = new Map<string, { at: number; rest: string }>();
  const waiters: Array<() => void> = [];
  let out = "";
  child.stdout!.on("data", (d: Buffer) => {
    out += d.toString();
    let nl: number;
    while ((nl = out.indexOf("\n")) >= 0) {
      const line = out.slice(0, nl);
      out = out.slice(nl + 1);
      const [word, ...rest] = line.split(" ");
      if (!seen.has(word)) seen.set(word, { at: t(), rest: rest.join(" ") });
      for (const w of waiters.splice(0)) w();
    }
  });
  child.on("exit", () => {
    for (const w of waiters.splice(0)) w();
  });
  /** Waits (within `ms`) until A printed `word`. */
  const said = async (word: string, ms: number): Promise<{ at: number; rest: string }> => {
    const end = t() + ms;
    for (;;) {
      const got = seen.get(word);
      if (got) return got;
      if (seen.has("failed")) throw new Error(`runner A failed: ${seen.get("failed")!.rest}`);
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`runner A exited before "${word}"`);
      if (t() > end) throw new Error(`runner A did not say "${word}" within ${ms} ms`);
      await new Promise<void>((r) => {
        waiters.push(r);
        setTimeout(r, end - t()).unref();
      });
    }
  };
  const kill = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGKILL");
    await exited;
  };
  return { said, kill };
}

/** Waits until the lease was renewed after it was first read (A renews before the outage). */
async function renewedOnce(url: string, env: Record<string, string | undefined>): Promise<void> {
  const store = openStore(url, env)!;
  const first = (await readLease(store, "outage"))?.renewedAt;
  const end = t() + OUTAGE_TTL_SECONDS * 1000;
  while ((await readLease(store, "outage"))?.renewedAt === first) {
    if (t() > end) throw new Error("runner A did not renew its lease");
    await new Promise((r) => setTimeout(r, 100));
  }
}

const asB = (url: string, env: Record<string, string | undefined>) =>
  acquireLock(url, "outage", "rollout", {
    ttlSeconds: OUTAGE_TTL_SECONDS,
    env,
    identity: { host: "runner-b", machine: "b" },
  });

export async function outageHolderDies(
  url: string,
  env: Record<string, string | undefined>,
  server: Freezable,
): Promise<DiesFigures> {
  const a = runnerA(url, env, false);
  let thawed = false;
  try {
    const aRunId = (await a.said("held", 30_000)).rest;
    await renewedOnce(url, env);
    const frozenAt = t();
    const frozenWall = Date.now();
    server.freeze();

    // A second runner from now on: its first attempt is the run started during the outage.
    let started: DiesFigures["startedDuringOutage"] | undefined;
    let refusedAfterThaw = 0;
    let thawAt = Infinity;
    const waiting = (async (): Promise<HeldLock> => {
      for (;;) {
        const t0 = t();
        try {
          return await asB(url, env);
        } catch (e) {
          if (!started) started = { ms: t() - t0, error: `${(e as Error).name}: ${(e as Error).message}` };
          if (e instanceof ConcurrentRolloutError) {
            if (t0 >= thawAt) refusedAfterThaw++;
            await new Promise((r) => setTimeout(r, 100));
          } else if (!(e instanceof BackendError)) throw e;
          if (t() - frozenAt > 60_000) throw new Error(`runner B never took the stack: ${(e as Error).message}`);
        }
      }
    })();

    const lost = await a.said("lost", OUTAGE_TTL_SECONDS * 1000 + 3000);
    await a.kill(); // dies during the freeze, its abandoned renewal buffered in the server
    const diedAt = t();
    // Frozen until the run started during the outage ended (it must, by the store's deadline).
    const end = frozenAt + STORE_CALL_MS + 5000;
    while (!started && t() < end) await new Promise((r) => setTimeout(r, 50));
    thawAt = t();
    server.thaw();
    thawed = true;
    const b = await waiting;
    const tookAt = t();
    const renewed = b.recoveredFrom?.renewedAt ? Date.parse(b.recoveredFrom.renewedAt) : 0;
    return {
      startedDuringOutage: started ?? { ms: Infinity, error: "it did not end during the outage" },
      gaveUpMs: lost.at - frozenAt,
      frozenMs: thawAt - frozenAt,
      lateRenewalSeen: renewed > frozenWall,
      takeoverAfterThawMs: tookAt - thawAt,
      takeoverAfterDeathMs: tookAt - diedAt,
      refusedAfterThaw,
      b,
      aRunId,
    };
  } finally {
    if (!thawed) server.thaw();
    await a.kill();
  }
}

export async function outageHolderReleases(
  url: string,
  env: Record<string, string | undefined>,
  server: Freezable,
): Promise<ReleasesFigures> {
  const a = runnerA(url, env, true);
  let thawed = false;
  try {
    await a.said("held", 30_000);
    await renewedOnce(url, env);
    const frozenAt = t();
    server.freeze();
    const lost = await a.said("lost", OUTAGE_TTL_SECONDS * 1000 + 3000);
    // A's release is under way (its delete sent after its abandoned renewal); the server runs
    // again well within the release's deadline.
    await a.said("releasing", 1000);
    const thawAt = t();
    server.thaw();
    thawed = true;
    const released = await Promise.race([
      a.said("released", STORE_CALL_MS + 5000),
      a.said("release-failed", STORE_CALL_MS + 5000).then((f) => {
        throw new Error(`runner A could not release its lease: ${f.rest}`);
      }),
    ]);
    assert.equal(await readLease(openStore(url, env)!, "outage"), undefined, "A's release left no lease");
    const b = await asB(url, env);
    return { gaveUpMs: lost.at - frozenAt, releasedAfterThawMs: released.at - thawAt, b };
  } finally {
    if (!thawed) server.thaw();
    await a.kill();
  }
}

/** The "dies" scenario with its assertions; prints the figures. */
export async function assertOutageDies(server: string, url: string, freezable: Freezable): Promise<void> {
  const f = await outageHolderDies(url, {}, freezable);
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  console.log(
    `    ${server} frozen ${s(f.frozenMs)} (lease ttl ${OUTAGE_TTL_SECONDS} s): a run started during the outage ` +
      `failed after ${s(f.startedDuringOutage.ms)}; the holder gave up ${s(f.gaveUpMs)} into it and was killed; ` +
      `its late renewal ${f.lateRenewalSeen ? "landed and was seen by the next runner" : "was not seen"}; ` +
      `the next runner held the stack ${s(f.takeoverAfterThawMs)} after the server answered again ` +
      `(${s(f.takeoverAfterDeathMs)} after the holder died; refused ${f.refusedAfterThaw} times after the thaw)`,
  );
  try {
    assert.match(f.startedDuringOutage.error, /^BackendError: .*did not answer within 10 s/);
    assert.ok(f.startedDuringOutage.ms <= STORE_CALL_MS + 2000, "a run started during the outage fails in time");
    assert.ok(
      f.gaveUpMs <= OUTAGE_TTL_SECONDS * 1000 - lossMarginMs(OUTAGE_TTL_SECONDS) + 1500,
      "the holder gives the lease up by its deadline, though its renewal hangs",
    );
    assert.equal(f.b.recoveredFrom?.holder.runId, f.aRunId, "B took A's lease over (reported)");
    assert.equal(f.refusedAfterThaw, 0, "no late write of the dead holder refused B");
    assert.ok(f.takeoverAfterThawMs < 3000, "B holds the stack as soon as the server answers");
  } finally {
    await f.b.release();
  }
}

/** The "releases" scenario with its assertions; prints the figures. */
export async function assertOutageReleases(server: string, url: string, freezable: Freezable): Promise<void> {
  const f = await outageHolderReleases(url, {}, freezable);
  console.log(
    `    ${server}: the holder gave up ${(f.gaveUpMs / 1000).toFixed(1)} s into the freeze and released; ` +
      `its lease was gone ${(f.releasedAfterThawMs / 1000).toFixed(1)} s after the server answered again`,
  );
  try {
    assert.equal(f.b.recoveredFrom, undefined, "B found the stack free (nothing to take over)");
  } finally {
    await f.b.release();
  }
}
