// The etcd backup molt takes before the first membership change of a run (an etcd
// "snapshot" in etcd's own words; called a backup here so it is never confused with
// the observed state of a pass).
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { EtcdEdge } from "./edges/types";
import type { RolloutEvent } from "./events";
import type { Timed } from "./loop/timing";
import type { World } from "./model";
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
