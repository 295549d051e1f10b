// The etcd backup molt takes before the first membership change of a run (an etcd
// "snapshot" in etcd's own words; called a backup here so it is never confused with
// the observed state of a pass), and their retention: the newest N per stack are kept.
import { mkdirSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { EtcdEdge } from "./core/edges";
import type { RolloutEvent } from "./events";
import type { Timed } from "./loop/timing";
import type { World } from "./core/model";
import { moltHome } from "./stack/engine";

export function backupDir(): string {
  return join(moltHome(), "snapshots");
}

/** A new backup file's path for `stack` (the directory is created, private). */
export function newBackupPath(stack: string, now = new Date()): string {
  const dir = backupDir();
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  return join(dir, `${stack}-${now.toISOString().replace(/[:.]/g, "-")}.db`);
}

/**
 * Saves an etcd snapshot of a voting member that answers into a new backup file (before
 * the first membership change of a run); returns its path. Undefined when no voter
 * answered (the planner does not change membership then).
 */
export async function takeBackup(
  etcd: EtcdEdge,
  world: World,
  stack: string,
  timed: Timed,
  report: (e: RolloutEvent) => void,
): Promise<string | undefined> {
  const node = world.nodes.find((n) => {
    const st = world.etcd?.status[n.name];
    return st?.ok && !st.status.isLearner;
  })?.name;
  if (!node) return undefined;
  const path = newBackupPath(stack);
  const bytes = await timed("snapshot", "wait", node, () => etcd.snapshot(node, path));
  report({ type: "snapshot", path, bytes, node });
  return path;
}

/** `stack`'s backups in `dir`, oldest first (the timestamp in the name sorts). Never another stack's. */
export function backupsOf(stack: string, dir = backupDir(), o: { partial?: boolean } = {}): string[] {
  const escaped = stack.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  // Exactly <stack>-<ISO time>.db: stack "lab" never matches "lab-2-<time>.db". `partial`: the
  // <name>.db.part a snapshot is written as until whole (what a killed run leaves).
  const end = o.partial ? "\\.db\\.part$" : "\\.db$";
  const mine = new RegExp(`^${escaped}-\\d{4}-\\d{2}-\\d{2}T\\d{2}-\\d{2}-\\d{2}-\\d{3}Z${end}`);
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  return names
    .filter((n) => mine.test(n))
    .sort()
    .map((n) => join(dir, n));
}

/**
 * Keeps the newest `keep` backups of `stack` and removes the others; `current` (this run's)
 * is always kept. Returns the removed paths.
 */
export function pruneBackups(stack: string, keep: number, current: string, dir = backupDir()): string[] {
  if (!Number.isInteger(keep) || keep < 1) throw new Error(`internal: keep ${keep} backups`);
  const older = backupsOf(stack, dir).filter((p) => p !== current);
  // Partial snapshots left by killed runs: never a backup, removed with the old ones.
  const removable = [
    ...older.slice(0, Math.max(0, older.length - (keep - 1))),
    ...backupsOf(stack, dir, { partial: true }),
  ];
  for (const p of removable) rmSync(p, { force: true });
  return removable;
}

/** After a run's backup: the retention, reported as an event when it removed anything. */
export function retainBackups(stack: string, keep: number, current: string, emit: (e: RolloutEvent) => void): void {
  const removed = pruneBackups(stack, keep, current);
  if (removed.length) emit({ type: "backups-pruned", stack, keep, removed });
}
