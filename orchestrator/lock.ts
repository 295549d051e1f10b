// One rollout per stack. The lock lives next to the state when the backend is a folder
// (so every runner sharing that backend sees it), else under ~/.molt. A lock whose
// holder is provably dead (same host, pid gone) is taken over and reported; a lock held
// by a live process, or by another host, is never touched.
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { alive } from "../lib/process";
import { BackendError } from "./stack/driver";
import { moltHome } from "./stack/engine";

export interface LockInfo {
  pid: number;
  host: string;
  startedAt: string;
  command: string;
}

export class ConcurrentRolloutError extends Error {
  constructor(
    readonly stackName: string,
    readonly holder: LockInfo,
    readonly path: string,
  ) {
    super(
      `another molt run holds stack "${stackName}" (pid ${holder.pid} on ${holder.host}, ${holder.command}, since ${holder.startedAt}); nothing was changed. ` +
        (holder.host === hostname()
          ? "Wait for it to finish."
          : `If that run is certainly dead, remove ${path} and run again.`),
    );
    this.name = "ConcurrentRolloutError";
  }
}

export function lockDir(backendUrl: string): string {
  if (backendUrl.startsWith("file://")) return join(fileURLToPath(backendUrl), ".molt", "locks");
  return join(moltHome(), "locks");
}

export interface HeldLock {
  path: string;
  /** Set when a dead run's lock was taken over: its holder. */
  recoveredFrom?: LockInfo;
  release(): void;
}

export function acquireLock(backendUrl: string, stack: string, command: string): HeldLock {
  const dir = lockDir(backendUrl);
  // A file backend's folder is never created here: a mistyped PULUMI_BACKEND_URL would
  // otherwise become a new, empty backend (and a rollout would create a new cluster).
  if (backendUrl.startsWith("file://") && !existsSync(fileURLToPath(backendUrl))) {
    throw new BackendError(backendUrl, `the folder ${fileURLToPath(backendUrl)} does not exist`);
  }
  try {
    mkdirSync(dir, { recursive: true });
  } catch (e) {
    throw new BackendError(
      backendUrl,
      `cannot create the lock folder ${dir} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`,
    );
  }
  const path = join(dir, `${stack}.json`);
  const me: LockInfo = { pid: process.pid, host: hostname(), startedAt: new Date().toISOString(), command };
  let recoveredFrom: LockInfo | undefined;
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(path, JSON.stringify(me), { flag: "wx" });
      // The dead holder's lock was moved aside to take it atomically; the event reports it.
      if (recoveredFrom) rmSync(`${path}.stale-${recoveredFrom.pid}`, { force: true });
      return {
        path,
        recoveredFrom,
        release: () => {
          try {
            const cur = JSON.parse(readFileSync(path, "utf8")) as LockInfo;
            if (cur.pid === me.pid && cur.host === me.host) rmSync(path, { force: true });
          } catch {
            /* already gone */
          }
        },
      };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
    }
    let holder: LockInfo;
    try {
      holder = JSON.parse(readFileSync(path, "utf8")) as LockInfo;
    } catch {
      holder = { pid: 0, host: hostname(), startedAt: "unknown", command: "unreadable lock" };
    }
    if (holder.host !== hostname() || (holder.pid > 0 && alive(holder.pid)))
      throw new ConcurrentRolloutError(stack, holder, path);
    // The holder died on this host: move its lock aside and retry (only one taker wins the rename).
    const aside = `${path}.stale-${holder.pid}`;
    if (existsSync(path)) renameSync(path, aside);
    recoveredFrom = holder;
  }
  throw new Error(`could not acquire ${path}`);
}
