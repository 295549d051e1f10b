// The lease takeover every shared store must show (s3-store and azblob-store integration
// tests): runner A, another process, holds the stack's lease with a 2 s ttl and is SIGKILLed;
// runner B is refused while A renews, then takes the lease only once it expired by the
// store's clock. Returns what the caller asserts on.
import * as assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { join } from "node:path";
import { acquireLock, ConcurrentRolloutError, type HeldLock } from "../../orchestrator/lease/bucket";
import { distDir } from "../../orchestrator/stack/engine";

export async function leaseTakeover(url: string): Promise<{ b: HeldLock; runId: string; waitedMs: number }> {
  const a = spawn(
    process.execPath,
    [
      "-e",
      `require(${JSON.stringify(join(distDir, "orchestrator", "lease", "bucket.js"))})
        .acquireLock(process.env.URL, "prod", "rollout",
          { ttlSeconds: 2, identity: { host: "runner-a", machine: "a" } })
        .then((l) => { console.log("held " + l.holder.runId); setInterval(() => {}, 1000); })`,
    ],
    { env: { ...process.env, URL: url }, stdio: ["ignore", "pipe", "inherit"] },
  );
  const runId = await new Promise<string>((resolve, reject) => {
    a.stdout!.on(
      "data",
      (d: Buffer) => /held (\S+)/.test(d.toString()) && resolve(/held (\S+)/.exec(d.toString())![1]),
    );
    a.on("exit", (c) => reject(new Error(`runner A exited ${c}`)));
  });
  const asB = () =>
    acquireLock(url, "prod", "rollout", { ttlSeconds: 2, identity: { host: "runner-b", machine: "b" } });
  await new Promise((r) => setTimeout(r, 2500)); // longer than the ttl: A renewed meanwhile
  await assert.rejects(asB(), ConcurrentRolloutError, "a live runner's lease is never taken");
  a.kill("SIGKILL");
  const t0 = Date.now();
  let b: HeldLock | undefined;
  while (!b) {
    b = await asB().catch((e: unknown) => {
      if (!(e instanceof ConcurrentRolloutError)) throw e;
      return undefined;
    });
    if (!b) await new Promise((r) => setTimeout(r, 250));
  }
  return { b, runId, waitedMs: Date.now() - t0 };
}
