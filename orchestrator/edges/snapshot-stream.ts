// An etcd snapshot streamed over gRPC into a local file (kubeadm nodes, whose etcd runs as a
// static pod with no etcdctl on the host). It ends in every case: a member that stops sending
// (its stream open, its tunnel up) is given up after a stall deadline, a file that cannot be
// written fails it, and a failed snapshot leaves no partial file behind, which a later restore
// could take for a whole one: it is written as `<path>.part` (a name no backup listing takes,
// also what a killed run leaves) and renamed once whole. It is written at the disk's pace (the
// stream pauses).
import { createWriteStream, renameSync, rmSync } from "node:fs";
import type { Writable } from "node:stream";

/** What etcd3's Maintenance.snapshot() gives: grpc-js's ClientReadableStream of chunks. */
export interface SnapshotStream {
  on(event: "data", fn: (chunk: { blob: Buffer }) => void): unknown;
  on(event: "end", fn: () => void): unknown;
  on(event: "error", fn: (e: Error) => void): unknown;
  pause(): unknown;
  resume(): unknown;
  cancel(): void;
}

/** No byte for this long from a member that is sending a snapshot: it is not going to finish. */
export const SNAPSHOT_STALL_MS = 60_000;

/** Writes the stream to `path` (0600); resolves with the bytes written. */
export function saveSnapshotStream(
  stream: SnapshotStream,
  path: string,
  o: { what: string; stallMs?: number; open?: (path: string) => Writable },
): Promise<number> {
  const stallMs = o.stallMs ?? SNAPSHOT_STALL_MS;
  const part = `${path}.part`;
  const out = o.open ? o.open(part) : createWriteStream(part, { mode: 0o600 });
  // A removal that fails (permissions) must not end the process from an event handler.
  const remove = () => {
    try {
      rmSync(part, { force: true });
    } catch {
      /* what the backup listing never takes: named .part */
    }
  };
  let bytes = 0;
  return new Promise<number>((resolve, reject) => {
    let settled = false;
    let stall: NodeJS.Timeout | undefined;
    const watch = () => {
      clearTimeout(stall);
      stall = setTimeout(
        () =>
          fail(
            new Error(`${o.what}: no data for ${stallMs >= 1000 ? `${stallMs / 1000} s` : `${stallMs} ms`}; given up`),
          ),
        stallMs,
      );
    };
    const fail = (e: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(stall);
      stream.cancel();
      // Removed once closed: a file still being opened would be made after an earlier unlink.
      if (out.closed) remove();
      else out.once("close", remove);
      out.destroy();
      reject(e);
    };
    watch();
    stream.on("data", (chunk) => {
      if (settled) return;
      bytes += chunk.blob.length;
      if (out.write(chunk.blob)) return watch();
      // The disk is behind: no more from the member until it caught up (not a stall).
      clearTimeout(stall);
      stream.pause();
      out.once("drain", () => {
        if (settled) return;
        watch();
        stream.resume();
      });
    });
    stream.on("end", () => {
      if (settled) return;
      clearTimeout(stall);
      // Its last writes may fail (a full disk): the error comes here first, then as "error".
      out.end((e?: Error | null) => {
        if (e) return fail(new Error(`${o.what}: writing ${part}: ${e.message}`));
        if (settled) return;
        settled = true;
        try {
          renameSync(part, path);
        } catch (err) {
          remove();
          return reject(new Error(`${o.what}: naming ${path}: ${(err as Error).message}`));
        }
        resolve(bytes);
      });
    });
    stream.on("error", (e) => fail(new Error(`${o.what}: ${e.message}`)));
    out.on("error", (e: Error) => fail(new Error(`${o.what}: writing ${part}: ${e.message}`)));
  });
}
