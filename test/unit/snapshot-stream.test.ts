// An etcd snapshot over gRPC into a file (orchestrator/edges/snapshot-stream.ts), with a
// stream that behaves as grpc-js's does (data, end, error, pause/resume, cancel): whole,
// stalled, unwritable, and at the disk's pace.
import * as assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough, Writable } from "node:stream";
import { saveSnapshotStream, type SnapshotStream } from "../../orchestrator/edges/snapshot-stream";

/** Chunks as etcd sends them ({ blob }), pushed by the test; `cancelled` once molt cancels. */
function fakeStream() {
  const s = new PassThrough({ objectMode: true }) as PassThrough & { cancelled: boolean; paused: number };
  s.cancelled = false;
  s.paused = 0;
  const pause = s.pause.bind(s);
  Object.assign(s, {
    cancel: () => {
      s.cancelled = true;
      s.destroy();
    },
    pause: () => {
      s.paused++;
      return pause();
    },
  });
  return s;
}

/** The files in `dir` whose names start with `prefix`. */
const leftIn = (dir: string, prefix: string) => readdirSync(dir).filter((f) => f.startsWith(prefix));
/** Lets a destroyed file stream close (its removal waits for that). */
const settle = () => new Promise((r) => setTimeout(r, 50));

describe("an etcd snapshot streamed into a file (edges/snapshot-stream.ts)", () => {
  let dir = "";
  before(() => (dir = mkdtempSync(join(tmpdir(), "molt-snapshot-"))));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("writes every chunk, 0600, and counts the bytes", async () => {
    const s = fakeStream();
    const path = join(dir, "whole.db");
    const saved = saveSnapshotStream(s as unknown as SnapshotStream, path, { what: "snapshot of n1" });
    s.write({ blob: Buffer.from("abc") });
    s.write({ blob: Buffer.from("defg") });
    s.end();
    assert.equal(await saved, 7);
    assert.equal(readFileSync(path, "utf8"), "abcdefg");
    assert.deepEqual(leftIn(dir, "whole"), ["whole.db"], "written as whole.db.part, then renamed");
    assert.equal(statSync(path).mode & 0o777, 0o600);
  });

  it("gives up on a member that stops sending, cancels the call and leaves no partial file", async () => {
    const s = fakeStream();
    const path = join(dir, "stalled.db");
    const t = Date.now();
    const saved = saveSnapshotStream(s as unknown as SnapshotStream, path, { what: "snapshot of n1", stallMs: 300 });
    s.write({ blob: Buffer.from("partial") });
    await assert.rejects(saved, /^Error: snapshot of n1: no data for 300 ms; given up$/);
    assert.ok(Date.now() - t >= 280, "after the stall deadline, counted from the last chunk");
    assert.equal(s.cancelled, true, "the gRPC call is cancelled");
    await settle();
    assert.deepEqual(leftIn(dir, "stalled"), [], "no partial snapshot left to be taken for a whole one");
  });

  it("keeps waiting while chunks come, however long the whole takes", async () => {
    const s = fakeStream();
    const path = join(dir, "slow.db");
    const saved = saveSnapshotStream(s as unknown as SnapshotStream, path, { what: "snapshot", stallMs: 200 });
    for (let i = 0; i < 6; i++) {
      s.write({ blob: Buffer.from(String(i)) });
      await new Promise((r) => setTimeout(r, 100));
    }
    s.end();
    assert.equal(await saved, 6, "600 ms in all, never 200 ms without a chunk");
  });

  it("fails, cancelling the call, when the file cannot be written", async () => {
    const s = fakeStream();
    const path = join(dir, "no-such-dir", "x.db");
    const saved = saveSnapshotStream(s as unknown as SnapshotStream, path, { what: "snapshot of n1" });
    s.write({ blob: Buffer.from("abc") });
    await assert.rejects(saved, /snapshot of n1: writing .*no-such-dir\/x\.db\.part: ENOENT/);
    assert.equal(s.cancelled, true);
  });

  it("a file whose last write fails (a full disk) fails the snapshot, not named as a whole one", async () => {
    const s = fakeStream();
    const path = join(dir, "full.db");
    const out = new Writable({
      write: (_c, _e, cb) => cb(),
      final: (cb) => cb(Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" })),
    });
    const saved = saveSnapshotStream(s as unknown as SnapshotStream, path, { what: "snapshot of n1", open: () => out });
    s.write({ blob: Buffer.from("abc") });
    s.end();
    await assert.rejects(saved, /^Error: snapshot of n1: writing .*full\.db\.part: ENOSPC/);
    assert.equal(s.cancelled, true);
  });

  it("a call that fails before the file is even open leaves no file", async () => {
    const s = fakeStream();
    const path = join(dir, "early.db");
    const saved = saveSnapshotStream(s as unknown as SnapshotStream, path, { what: "snapshot of n1" });
    s.emit("error", new Error("14 UNAVAILABLE: no connection"));
    await assert.rejects(saved, /no connection/);
    await settle();
    assert.deepEqual(leftIn(dir, "early"), []);
  });

  it("a failed call fails the snapshot, with no file left", async () => {
    const s = fakeStream();
    const path = join(dir, "failed.db");
    const saved = saveSnapshotStream(s as unknown as SnapshotStream, path, { what: "snapshot of n1" });
    s.write({ blob: Buffer.from("abc") });
    setTimeout(() => s.emit("error", new Error("14 UNAVAILABLE: connection dropped")), 20);
    await assert.rejects(saved, /snapshot of n1: 14 UNAVAILABLE: connection dropped/);
    await settle();
    assert.deepEqual(leftIn(dir, "failed"), []);
  });

  it("pauses the stream while the file is behind, and takes every byte", async () => {
    const s = fakeStream();
    const path = join(dir, "big.db");
    const saved = saveSnapshotStream(s as unknown as SnapshotStream, path, { what: "snapshot" });
    const chunk = Buffer.alloc(256 * 1024, 7);
    for (let i = 0; i < 64; i++) s.write({ blob: chunk });
    s.end();
    assert.equal(await saved, 64 * chunk.length);
    assert.equal(statSync(path).size, 64 * chunk.length);
    assert.ok(s.paused > 0, "the stream was paused at least once (16 MiB into a 16 KiB write buffer)");
  });
});
