// The etcd backup molt takes before the first membership change of a run (an etcd
// "snapshot" in etcd's own words; called a backup here so it is never confused with
// the observed state of a pass).
import { mkdirSync } from "node:fs";
import { join } from "node:path";
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
