// A connection that fails must fail once, as a rejected connect: a machine that accepts TCP
// but never speaks SSH (a half-booted VM, a hung sshd) times out and then reports the lost
// connection as a second error, which, unheard, ended the whole molt process.
import * as assert from "node:assert/strict";
import { createServer, type Server, type Socket } from "node:net";
import { generateSshKeyPair, SshSession } from "../../../infra/remote/ssh";

describe("SSH connect to a machine that does not speak SSH", () => {
  let server: Server;
  let port = 0;
  const held: Socket[] = [];
  const uncaught: Error[] = [];
  const onUncaught = (e: Error) => void uncaught.push(e);

  before(async () => {
    // Accepts and says nothing; the test drops the connection once the client gave up.
    server = createServer((s) => void held.push(s));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    port = (server.address() as { port: number }).port;
    process.prependListener("uncaughtException", onUncaught);
  });

  after(async () => {
    process.removeListener("uncaughtException", onUncaught);
    held.forEach((s) => s.destroy());
    await new Promise<void>((r) => server.close(() => r()));
  });

  it("rejects with the handshake timeout, and the lost connection after it raises nothing", async () => {
    const key = generateSshKeyPair("client");
    const host = generateSshKeyPair("host");
    await assert.rejects(
      SshSession.connect(
        { host: "127.0.0.1", port, user: "molt", privateKey: key.privateKey, hostKey: host.publicKey },
        { readyTimeoutMs: 150 },
      ),
      /Timed out while waiting for handshake/,
    );
    assert.equal(held.length, 1, "the client connected once");
    // The machine drops the connection: the client's socket closes, its second error comes then
    // (without the fix it is reported here within a few ms; 300 ms leaves room on a loaded host).
    await new Promise((r) => held[0].once("close", r).destroy());
    await new Promise((r) => setTimeout(r, 300));
    assert.deepEqual(
      uncaught.map((e) => e.message),
      [],
    );
  });
});
