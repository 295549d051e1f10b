// An etcd snapshot streamed over gRPC into a local file (kubeadm nodes, whose etcd runs as a
// static pod with no etcdctl on the host). It ends in every case: a member that stops sending
// (its stream open, its tunnel up) is given up after a stall deadline, a file that cannot be
// written fails it, and a failed snapshot leaves no partial file behind, which a later restore
// could take for a whole one: it is written as `<path>.part` (a name no backup listing takes,
// also what a killed run leaves) and renamed once whole. It is written at the disk's pace (the
// stream pauses).
import { createWriteStream, renameSync, rmSync } from "node:fs";

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
  o: { what: string; stallMs?: number },
): Promise<number> {
  const stallMs = o.stallMs ?? SNAPSHOT_STALL_MS;
  const part = `${path}.part`;
  const out = createWriteStream(part, { mode: 0o600 });
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
      if (out.closed) rmSync(part, { force: true });
      else out.once("close", () => rmSync(part, { force: true }));
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
      out.end(() => {
        if (settled) return;
        settled = true;
        try {
          renameSync(part, path);
        } catch (e) {
          rmSync(part, { force: true });
          return reject(new Error(`${o.what}: naming ${path}: ${(e as Error).message}`));
        }
        resolve(bytes);
      });
    });
    stream.on("error", (e) => fail(new Error(`${o.what}: ${e.message}`)));
    out.on("error", (e) => fail(new Error(`${o.what}: writing ${part}: ${e.message}`)));
  });
}
