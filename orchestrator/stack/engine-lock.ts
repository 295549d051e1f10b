// The engine's own lock on a stack (Pulumi's DIY backends keep it as
// `.pulumi/locks/organization/<project>/<stack>/<uuid>.json` holding pid, username, hostname
// and timestamp, in a folder or a bucket alike). molt holds its lease before it looks here,
// so a lock left is a dead or orphaned run's - or a `pulumi` someone runs by hand. It is
// removed the engine's own way (`pulumi cancel`, which deletes the stack's lock files) only
// when its engine is provably gone:
//  - same host: its process has exited (a live orphan is waited for, with a deadline);
//  - another host: this run took over that host's expired lease, and that run's engines were
//    bound to it (they die with their molt process: stack/engine-bind.ts).
// Anything else is refused, naming the lock: nothing is removed on a guess.
import { hostname } from "node:os";
import { alive } from "../../lib/process";
import { pollUntil } from "../../lib/poll";
import type { ObjectStore } from "../backend/object-store";
import type { HeldLock } from "../lease/bucket";

export interface EngineLock {
  key: string;
  pid?: number;
  hostname?: string;
  username?: string;
  timestamp?: string;
}

export class EngineLockedError extends Error {
  constructor(
    readonly stackName: string,
    readonly lock: EngineLock,
    where: string,
  ) {
    super(
      `the Pulumi engine's lock on stack "${stackName}" is held by pid ${lock.pid ?? "?"} on ${lock.hostname ?? "?"} ` +
        `(user ${lock.username ?? "?"}, since ${lock.timestamp ?? "?"}; ${lock.key} in ${where}), ` +
        "and no molt run this run " +
        `took over owned it; nothing was changed. Check that no \`pulumi\` runs there for this stack, then run ` +
        `\`pulumi cancel --stack ${stackName}\` and molt again.`,
    );
    this.name = "EngineLockedError";
  }
}

export function engineLockPrefix(stack: string, project = "molt"): string {
  return `.pulumi/locks/organization/${project}/${stack}/`;
}

export async function engineLocks(store: ObjectStore, stack: string): Promise<EngineLock[]> {
  const keys = (await store.list(engineLockPrefix(stack))).filter((k) => k.endsWith(".json"));
  const locks: EngineLock[] = [];
  for (const key of keys) {
    const obj = await store.get(key);
    if (!obj) continue;
    try {
      locks.push({ key, ...(JSON.parse(obj.body.toString("utf8")) as Omit<EngineLock, "key">) });
    } catch {
      locks.push({ key });
    }
  }
  return locks;
}

/**
 * Waits out same-host orphans, refuses locks whose engine cannot be proven gone, and has
 * the engine remove the rest (`cancel`). Returns the locks removed.
 */
export async function settleEngineLock(o: {
  store: ObjectStore;
  stack: string;
  recovered?: HeldLock["recoveredFrom"];
  deadlineSeconds: number;
  cancel: () => Promise<void>;
  signal?: AbortSignal;
}): Promise<EngineLock[]> {
  const locks = await engineLocks(o.store, o.stack);
  if (locks.length === 0) return [];
  for (const lock of locks) {
    const pid = lock.pid;
    if (lock.hostname === hostname() && pid) {
      await pollUntil(() => (alive(pid) ? undefined : true), {
        what:
          `the orphaned Pulumi engine (pid ${pid}) still updating stack ${o.stack} to exit; ` +
          "wait for it or stop it, then run again",
        deadlineMs: o.deadlineSeconds * 1000,
        maxIntervalMs: 250,
        ...(o.signal ? { signal: o.signal } : {}),
      });
      continue;
    }
    const r = o.recovered;
    const deadRun = r?.reason === "expired" && r.holder.host === lock.hostname && r.holder.engineBound === true;
    if (!deadRun) throw new EngineLockedError(o.stack, lock, o.store.location);
  }
  await o.cancel();
  return locks;
}
