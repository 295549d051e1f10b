// How an SSH connect ends when the other end goes away during the handshake: a loopback
// server that behaves as an sshd does when its machine is destroyed, or as an sshd that
// answers and then says nothing, and a real sshd killed in the middle of the key exchange
// (through a relay that cuts the connection after the server's first packets). Before the
// fix, the second kind never settled: ssh2 emits neither "ready" nor "error" and clears its
// ready timeout when the socket closes (the chaos CI subset's hang, session 23).
import * as assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, connect, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SshHandshakeClosedError, SshSession } from "../../infra/remote/ssh";
import { generateSshKeyPair } from "../../infra/remote/ssh-keys";
import { pollUntil } from "../../lib/poll";

const client = generateSshKeyPair("client");
const host = generateSshKeyPair("host");

async function listen(onConnection: (s: Socket) => void): Promise<{ server: Server; port: number }> {
  const server = createServer(onConnection);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return { server, port: (server.address() as { port: number }).port };
}

/** The connect's outcome, or "pending" if it has not settled within `ms`. */
async function outcome(port: number, ms: number, readyTimeoutMs?: number): Promise<{ what: string; ms: number }> {
  const t0 = Date.now();
  let timer: NodeJS.Timeout | undefined;
  const pending = new Promise<string>((r) => (timer = setTimeout(() => r("pending"), ms)));
  const what = await Promise.race([
    SshSession.connect(
      { host: "127.0.0.1", port, user: "root", privateKey: client.privateKey, hostKey: host.publicKey },
      readyTimeoutMs ? { readyTimeoutMs } : {},
    ).then(
      (s) => {
        s.close();
        return "connected";
      },
      (e: Error) => `${e instanceof SshHandshakeClosedError ? "SshHandshakeClosedError" : e.name}: ${e.message}`,
    ),
    pending,
  ]);
  clearTimeout(timer);
  return { what, ms: Date.now() - t0 };
}

describe("SSH connect when the other end goes away during the handshake", () => {
  const servers: Server[] = [];
  after(() => servers.forEach((s) => s.close()));

  it("a server that sends its banner and closes: rejected at once, saying so (it hung forever)", async () => {
    const { server, port } = await listen((s) => {
      s.write("SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u7\r\n");
      setTimeout(() => s.end(), 50);
    });
    servers.push(server);
    const r = await outcome(port, 10_000);
    assert.match(
      r.what,
      /^SshHandshakeClosedError: the connection to 127\.0\.0\.1:\d+ was closed during the SSH handshake/,
    );
    assert.ok(r.ms < 5_000, `settled in ${r.ms} ms`);
  });

  it("a server that closes before its banner, or resets: rejected at once (ssh2's own errors)", async () => {
    const closes = await listen((s) => s.end());
    const resets = await listen((s) => s.resetAndDestroy());
    servers.push(closes.server, resets.server);
    assert.match((await outcome(closes.port, 10_000)).what, /Connection lost before handshake/);
    assert.match((await outcome(resets.port, 10_000)).what, /ECONNRESET/);
  });

  it("a server that sends its banner and then nothing: rejected at the ready timeout", async () => {
    const { server, port } = await listen((s) => void s.write("SSH-2.0-OpenSSH_9.2p1\r\n"));
    servers.push(server);
    const r = await outcome(port, 10_000, 500);
    assert.match(r.what, /Timed out while waiting for handshake/);
    assert.ok(r.ms >= 450 && r.ms < 5_000, `settled in ${r.ms} ms`);
  });

  describe("a real sshd, cut off in the key exchange", function () {
    let dir = "";
    let sshd: ChildProcess | undefined;
    let sshdPort = 0;
    before(async function () {
      this.timeout(30_000);
      dir = mkdtempSync(join(tmpdir(), "molt-ssh-cut-"));
      writeFileSync(join(dir, "host_key"), host.privateKey, { mode: 0o600 });
      chmodSync(join(dir, "host_key"), 0o600);
      writeFileSync(join(dir, "authorized_keys"), `${client.publicKey}\n`);
      const probe = await listen(() => undefined);
      sshdPort = (probe.server.address() as { port: number }).port;
      probe.server.close();
      writeFileSync(
        join(dir, "sshd_config"),
        [
          `Port ${sshdPort}`,
          "ListenAddress 127.0.0.1",
          `HostKey ${join(dir, "host_key")}`,
          `AuthorizedKeysFile ${join(dir, "authorized_keys")}`,
          "PermitRootLogin prohibit-password",
          "PasswordAuthentication no",
          "StrictModes no",
          `PidFile ${join(dir, "sshd.pid")}`,
        ].join("\n"),
      );
      assert.equal(spawnSync("/usr/sbin/sshd", ["-t", "-f", join(dir, "sshd_config")]).status, 0, "sshd config");
      sshd = spawn("/usr/sbin/sshd", ["-D", "-e", "-f", join(dir, "sshd_config")], { stdio: "ignore" });
      const s = await pollUntil(() => outcome(sshdPort, 5_000).then((r) => (r.what === "connected" ? r : undefined)), {
        what: "the test sshd to answer",
        deadlineMs: 20_000,
      });
      assert.equal(s.what, "connected");
    });
    after(() => {
      sshd?.kill();
      rmSync(dir, { recursive: true, force: true });
    });

    it("a command's output into a file: whole on exit 0, refused on another exit or a cut connection", async () => {
      // Through a relay the test can cut, to a real sshd.
      let cut = () => undefined as void;
      const { server, port } = await listen((down) => {
        const up = connect(sshdPort, "127.0.0.1");
        down.pipe(up).pipe(down);
        down.on("error", () => up.destroy());
        up.on("error", () => down.destroy());
        cut = () => {
          up.destroy();
          down.destroy();
        };
      });
      servers.push(server);
      const s = await SshSession.connect({
        host: "127.0.0.1",
        port,
        user: "root",
        privateKey: client.privateKey,
        hostKey: host.publicKey,
      });
      try {
        const file = join(dir, "out");
        assert.equal(await s.execToFile("printf abc", file, "copy"), 3);
        assert.equal(readFileSync(file, "utf8"), "abc");
        await assert.rejects(
          s.execToFile("printf abc; exit 3", file, "copy"),
          /^RemoteCommandError: copy on 127\.0\.0\.1 failed \(exit 3\)/,
        );
        const copying = s.execToFile("head -c 50000000 /dev/zero", file, "copy");
        setTimeout(() => cut(), 200);
        await assert.rejects(copying, /copy on 127\.0\.0\.1 failed \(exit signal\): no exit status/);
      } finally {
        s.close();
      }
    });

    it("a relay that closes both sides after the server's first two packets: rejected at once", async () => {
      // Banner, then KEXINIT: the client is in the key exchange when the server side goes.
      const { server, port } = await listen((down) => {
        const up = connect(sshdPort, "127.0.0.1");
        let chunks = 0;
        up.on("data", (d) => {
          down.write(d);
          if (++chunks >= 2) {
            up.destroy();
            down.end();
          }
        });
        down.on("data", (d) => up.write(d));
        down.on("error", () => up.destroy());
        up.on("error", () => down.destroy());
      });
      servers.push(server);
      const r = await outcome(port, 10_000);
      assert.match(r.what, /^SshHandshakeClosedError: /);
      assert.ok(r.ms < 5_000, `settled in ${r.ms} ms`);
    });
  });
});
