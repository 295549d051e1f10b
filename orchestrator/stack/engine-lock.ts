// The engine's own lock on a stack. molt holds its rollout lock before it looks here, so
// any engine lock left is a dead or orphaned run's.
import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { alive } from "../../lib/process";
import { pollUntil } from "../../lib/poll";

/**
 * File backend: an engine process still alive on this host (its molt was killed) is
 * waited for, with a deadline; a lock whose process is gone is removed. A lock from
 * another host is never touched.
 */
export async function settleEngineLock(backend: string, stack: string, deadlineSeconds: number): Promise<void> {
  if (!backend.startsWith("file://")) return;
  const dir = join(fileURLToPath(backend), ".pulumi", "locks", "organization", "molt", stack);
  if (!existsSync(dir)) return;
  for (const f of readdirSync(dir)) {
    const path = join(dir, f);
    let lock: { pid?: number; hostname?: string };
    try {
      lock = JSON.parse(readFileSync(path, "utf8")) as { pid?: number; hostname?: string };
    } catch {
      continue;
    }
    const pid = lock.pid;
    if (lock.hostname !== hostname() || !pid) continue;
    await pollUntil(() => (alive(pid) && existsSync(path) ? undefined : true), {
      what: `the orphaned Pulumi engine (pid ${pid}) still updating stack ${stack} to exit; wait for it or stop it, then run again`,
      deadlineMs: deadlineSeconds * 1000,
      maxIntervalMs: 250,
    });
    rmSync(path, { force: true });
    rmSync(`${path}.attrs`, { force: true }); // the file backend's metadata of the lock
  }
}
