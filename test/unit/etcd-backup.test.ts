// Retention of etcd backups: the newest N per stack, never the current run's, never another stack's.
import * as assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { backupsOf, pruneBackups, retainBackups } from "../../orchestrator/etcd-backup";
import { humanRenderer } from "../../orchestrator/cli/render";
import type { RolloutEvent } from "../../orchestrator/events";

describe("etcd backup retention", () => {
  let dir: string;
  const file = (stack: string, minute: number) => {
    const p = join(dir, `${stack}-2026-11-30T10-${String(minute).padStart(2, "0")}-00-000Z.db`);
    writeFileSync(p, "x");
    return p;
  };
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), "molt-backups-"))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("keeps the newest N of the stack and removes the older ones, oldest first", () => {
    const made = [1, 2, 3, 4, 5].map((m) => file("lab", m));
    const removed = pruneBackups("lab", 2, made[4], dir);
    assert.deepEqual(removed, made.slice(0, 3));
    assert.deepEqual(backupsOf("lab", dir), made.slice(3));
  });

  it("never removes the current run's backup, even when its name sorts oldest (a clock set back)", () => {
    const current = file("lab", 0);
    const later = [5, 6, 7].map((m) => file("lab", m));
    const removed = pruneBackups("lab", 2, current, dir);
    assert.ok(existsSync(current));
    assert.deepEqual(removed, later.slice(0, 2));
    assert.deepEqual(backupsOf("lab", dir), [current, later[2]]);
  });

  it("keep 1 leaves only the current backup", () => {
    const made = [1, 2, 3].map((m) => file("lab", m));
    pruneBackups("lab", 1, made[2], dir);
    assert.deepEqual(backupsOf("lab", dir), [made[2]]);
  });

  it("removes the partial snapshots killed runs left (.db.part), never another stack's, never listing them", () => {
    const made = [1, 2].map((m) => file("lab", m));
    const partial = `${file("lab", 3)}.part`;
    rmSync(partial.slice(0, -".part".length));
    writeFileSync(partial, "cut");
    const others = `${file("lab-2", 4)}.part`;
    writeFileSync(others, "cut");
    assert.deepEqual(backupsOf("lab", dir), made, "a partial snapshot is no backup");
    const removed = pruneBackups("lab", 2, made[1], dir);
    assert.deepEqual(removed, [partial]);
    assert.ok(!existsSync(partial));
    assert.ok(existsSync(others), "lab-2's is not lab's");
    assert.deepEqual(backupsOf("lab", dir), made);
  });

  it("never touches another stack's backups, nor files that are not backups", () => {
    const other = [1, 2, 3].map((m) => file("lab-2", m));
    const prefix = [1, 2].map((m) => file("la", m));
    writeFileSync(join(dir, "lab-notes.txt"), "mine");
    writeFileSync(join(dir, "lab-2026-11-30T10-01-00-000Z.db.partial"), "x");
    const mine = [1, 2, 3].map((m) => file("lab", m));
    pruneBackups("lab", 1, mine[2], dir);
    const left = readdirSync(dir).sort();
    for (const p of [...other, ...prefix]) assert.ok(left.includes(basename(p)), `${basename(p)} kept`);
    assert.ok(left.includes("lab-notes.txt") && left.includes("lab-2026-11-30T10-01-00-000Z.db.partial"));
    assert.deepEqual(backupsOf("lab", dir), [mine[2]]);
  });

  it("removes nothing while there are no more than N", () => {
    const made = [1, 2].map((m) => file("lab", m));
    assert.deepEqual(pruneBackups("lab", 3, made[1], dir), []);
    assert.deepEqual(backupsOf("lab", dir), made);
  });

  it("a run's retention says what it removed (an event, a human line), and nothing when nothing went", () => {
    const saved = process.env.MOLT_HOME;
    process.env.MOLT_HOME = dir; // the run's retention works in $MOLT_HOME/snapshots
    try {
      const snapshots = join(dir, "snapshots");
      mkdirSync(snapshots);
      const made = [1, 2, 3, 4].map((m) => join(snapshots, `lab-2026-11-30T10-0${m}-00-000Z.db`));
      for (const p of made) writeFileSync(p, "x");
      const events: RolloutEvent[] = [];
      retainBackups("lab", 2, made[3], (e) => events.push(e));
      assert.deepEqual(events, [{ type: "backups-pruned", stack: "lab", keep: 2, removed: made.slice(0, 2) }]);
      let text = "";
      humanRenderer({ write: (t) => void (text += t), tty: false, deadlineOf: () => 60, now: () => 0 })(events[0]);
      assert.match(text, /removed 2 older etcd snapshot\(s\) of stack lab \(molt:backups\.keep 2\): /);
      assert.ok(text.includes(made[0]) && text.includes(made[1]), text);
      const none: RolloutEvent[] = [];
      retainBackups("lab", 2, made[3], (e) => none.push(e));
      assert.deepEqual(none, [], "nothing removed, nothing said");
    } finally {
      if (saved === undefined) delete process.env.MOLT_HOME;
      else process.env.MOLT_HOME = saved;
    }
  });
});
