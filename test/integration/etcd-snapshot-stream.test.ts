// The snapshot molt takes of a kubeadm node's etcd (no etcdctl on the host: etcd's own gRPC
// Maintenance.Snapshot stream, orchestrator/edges/snapshot-stream.ts) against a real etcd
// (Debian's, on loopback): the file is etcd's whole database, and a member that stops sending
// in the middle (SIGSTOP: its connection stays up) is given up at the stall deadline, its call
// cancelled, no partial file left.
import * as assert from "node:assert/strict";
import { type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Etcd3 } from "etcd3";
import { saveSnapshotStream, type SnapshotStream } from "../../orchestrator/edges/snapshot-stream";
import { spawnEtcd, untilEtcdAnswers } from "../support/etcd-process";
import { freePort } from "../support/s3";

describe("an etcd snapshot over gRPC from a real etcd", function () {
  this.timeout(60_000);
  let dir = "";
  let etcd: ChildProcess;
  let client: Etcd3;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "molt-etcd-snapshot-"));
    const [port, peer] = [await freePort(), await freePort()];
    etcd = spawnEtcd(dir, `http://127.0.0.1:${port}`, peer);
    client = new Etcd3({ hosts: `http://127.0.0.1:${port}` });
    await untilEtcdAnswers(client);
    // About 24 MiB of values: a stream of many chunks, long enough to stop in the middle.
    const value = "x".repeat(64 * 1024);
    for (let i = 0; i < 384; i += 16)
      await Promise.all(Array.from({ length: 16 }, (_, j) => client.put(`k${i + j}`).value(value)));
  });
  after(() => {
    client?.close();
    etcd?.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  });

  it("saves the whole database", async () => {
    const path = join(dir, "whole.db");
    const stream = await client.maintenance.snapshot();
    const bytes = await saveSnapshotStream(stream as unknown as SnapshotStream, path, { what: "snapshot" });
    const status = await client.maintenance.status();
    assert.equal(statSync(path).size, bytes);
    assert.ok(bytes >= Number(status.dbSize), `${bytes} bytes for a database of ${status.dbSize}`);
  });

  it("gives up on a member that stops sending, cancelling the call, with no file left", async () => {
    const path = join(dir, "stalled.db");
    const stream = (await client.maintenance.snapshot()) as unknown as SnapshotStream;
    const errors: Error[] = [];
    stream.on("error", (e) => errors.push(e));
    let chunks = 0;
    stream.on("data", () => {
      // The member stops (SIGSTOP) after its first chunks: its connection stays open.
      if (++chunks === 2) etcd.kill("SIGSTOP");
    });
    const t = Date.now();
    try {
      await assert.rejects(
        saveSnapshotStream(stream, path, { what: "snapshot of the member", stallMs: 1_500 }),
        /^Error: snapshot of the member: no data for 1\.5 s; given up$/,
      );
      assert.ok(Date.now() - t < 10_000, `given up after ${Date.now() - t} ms`);
      await new Promise((r) => setTimeout(r, 100));
      assert.equal(existsSync(path), false);
      assert.equal(existsSync(`${path}.part`), false);
      assert.match(errors.map((e) => e.message).join("; "), /CANCELLED/, "the gRPC call was cancelled");
    } finally {
      etcd.kill("SIGCONT");
    }
    // The member is fine afterwards: the cancelled call left nothing in its way.
    assert.ok((await client.maintenance.status()).version);
  });
});
