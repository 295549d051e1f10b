// A shared backend that stops answering: every call of molt's object stores ends by its
// deadline with an error that says so, instead of holding the run for as long as the outage
// lasts. The "server" here accepts connections and never answers (as a frozen one does: the
// kernel still completes the handshake and buffers the request).
import * as assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { createServer, type Server, type Socket } from "node:net";
import { AzureBlobStore } from "../../orchestrator/backend/azblob";
import { S3Store } from "../../orchestrator/backend/s3";
import { CallAbandonedError, STORE_CALL_MS, type ObjectStore } from "../../orchestrator/backend/object-store";
import { BackendError } from "../../orchestrator/stack/driver";

describe("a shared store that stops answering", function () {
  this.timeout(30_000);
  let server: Server;
  let port: number;
  const sockets: Socket[] = [];
  before(async () => {
    server = createServer((s) => void sockets.push(s));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    port = (server.address() as { port: number }).port;
  });
  after(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((r) => server.close(r));
  });
  const stores = (): Array<[string, ObjectStore]> => [
    [
      "s3",
      new S3Store(`s3://molt-state?endpoint=http://127.0.0.1:${port}&s3ForcePathStyle=true&region=us-east-1`, {
        AWS_ACCESS_KEY_ID: "molt-test",
        AWS_SECRET_ACCESS_KEY: randomBytes(12).toString("hex"),
      }),
    ],
    [
      "azblob",
      new AzureBlobStore(`azblob://molt-state?domain=127.0.0.1:${port}&protocol=http`, {
        AZURE_STORAGE_ACCOUNT: "moltdev",
        AZURE_STORAGE_KEY: randomBytes(32).toString("base64"),
      }),
    ],
  ];

  it("fails a call with a BackendError within the store's deadline, for S3 and Azure Blob", async () => {
    const t0 = performance.now();
    await Promise.all(
      stores().map(async ([name, s]) => {
        await assert.rejects(s.check(), (e: unknown) => {
          const ms = performance.now() - t0;
          assert.ok(e instanceof BackendError, `${name}: ${String(e)}`);
          assert.match((e as Error).message, /did not answer within 10 s/, name);
          assert.ok(ms >= STORE_CALL_MS - 100 && ms < STORE_CALL_MS + 2000, `${name}: failed after ${ms} ms`);
          return true;
        });
      }),
    );
  });

  it("abandons a call at once when its caller's signal aborts (a lease lost, a renewal's deadline)", async () => {
    await Promise.all(
      stores().map(async ([name, s]) => {
        const t0 = performance.now();
        const ac = new AbortController();
        setTimeout(() => ac.abort(new Error("the lease was lost")), 300);
        await assert.rejects(s.putIfMatch("k.json", Buffer.from("{}"), '"x"', { signal: ac.signal }), (e: unknown) => {
          assert.ok(e instanceof CallAbandonedError, `${name}: ${String(e)}`);
          assert.match((e as Error).message, /abandoned: the lease was lost/);
          assert.ok(performance.now() - t0 < 1500, `${name}: abandoned after ${performance.now() - t0} ms`);
          return true;
        });
      }),
    );
  });
});
