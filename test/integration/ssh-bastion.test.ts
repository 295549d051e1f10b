// molt's SSH edge through a real OpenSSH bastion and with a real ssh-agent (loopback; the
// lab's isolated bridge proves in e2e that nodes are reachable only through the bastion).
import * as assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { HookFiles, writeSshConfig } from "../../orchestrator/controls/hooks";
import { connect, createServer } from "node:net";
import {
  BastionError,
  fingerprintOf,
  generateSshKeyPair,
  HostKeyMismatchError,
  scanHostKey,
  SshCredentialsError,
  SshHandshakeClosedError,
  SshSession,
  UnreachableThroughBastionError,
} from "../../infra/remote/ssh";
import { startAgent, startSshd, type TestAgent, type TestSshd } from "../support/sshd";

describe("SSH through a bastion, and with an ssh-agent (infra/remote/ssh.ts)", function () {
  this.timeout(60_000);
  const client = generateSshKeyPair("molt test client");
  const stranger = generateSshKeyPair("not authorized anywhere");
  let node: TestSshd;
  let bastion: TestSshd;
  let closedBastion: TestSshd;
  let openBastion: TestSshd;
  let agent: TestAgent;
  const savedSock = process.env.SSH_AUTH_SOCK;

  before(async () => {
    node = await startSshd({ authorizedKey: client.publicKey });
    bastion = await startSshd({ authorizedKey: client.publicKey, permitOpen: `127.0.0.1:${node.port}` });
    closedBastion = await startSshd({ authorizedKey: client.publicKey, permitOpen: "none" });
    openBastion = await startSshd({ authorizedKey: client.publicKey, permitOpen: "any" });
    agent = startAgent(client.privateKey);
  });
  after(async () => {
    await Promise.all([node?.stop(), bastion?.stop(), closedBastion?.stop(), openBastion?.stop()]);
    agent?.stop();
    if (savedSock === undefined) delete process.env.SSH_AUTH_SOCK;
    else process.env.SSH_AUTH_SOCK = savedSock;
  });

  const through = (b: TestSshd, o: { hostKey?: string; privateKey?: string } = {}) => ({
    host: "127.0.0.1",
    port: b.port,
    user: "root",
    privateKey: o.privateKey ?? client.privateKey,
    hostKey: o.hostKey ?? b.hostKey,
  });

  it("runs a command on the node through the bastion, both host keys pinned", async () => {
    const s = await SshSession.connect({
      host: "127.0.0.1",
      port: node.port,
      user: "root",
      privateKey: client.privateKey,
      hostKey: node.hostKey,
      bastion: through(bastion),
    });
    try {
      assert.equal((await s.run("echo through-the-bastion", "echo")).trim(), "through-the-bastion");
      // Tunnels ride on the same chain.
      const fwd = await s.forward("127.0.0.1", node.port);
      const banner = await new Promise<string>((resolve) => {
        const c = connect({ host: "127.0.0.1", port: fwd.port });
        c.once("data", (d: Buffer) => (c.destroy(), resolve(d.toString())));
      });
      assert.match(banner, /^SSH-2\.0-/);
      await fwd.close();
    } finally {
      s.close();
    }
  });

  it("refuses a bastion whose host key is not the pinned one", async () => {
    await assert.rejects(
      SshSession.connect({
        host: "127.0.0.1",
        port: node.port,
        user: "root",
        privateKey: client.privateKey,
        hostKey: node.hostKey,
        bastion: through(bastion, { hostKey: node.hostKey }),
      }),
      (e: Error) => e instanceof HostKeyMismatchError && /host key of bastion 127\.0\.0\.1/.test(e.message),
    );
  });

  it("refuses a node whose host key is not the pinned one, behind a good bastion", async () => {
    await assert.rejects(
      SshSession.connect({
        host: "127.0.0.1",
        port: node.port,
        user: "root",
        privateKey: client.privateKey,
        hostKey: bastion.hostKey,
        bastion: through(bastion),
      }),
      (e: Error) => e instanceof HostKeyMismatchError && /^host key of 127\.0\.0\.1/.test(e.message),
    );
  });

  it("says the bastion refused when it does not accept molt's key", async () => {
    await assert.rejects(
      SshSession.connect({
        host: "127.0.0.1",
        port: node.port,
        user: "root",
        privateKey: client.privateKey,
        hostKey: node.hostKey,
        bastion: through(bastion, { privateKey: stranger.privateKey }),
      }),
      (e: Error) => e instanceof BastionError && /bastion root@127\.0\.0\.1:\d+: .*authentication/i.test(e.message),
    );
  });

  it("says the bastion refused when it may not forward to the node", async () => {
    await assert.rejects(
      SshSession.connect({
        host: "127.0.0.1",
        port: node.port,
        user: "root",
        privateKey: client.privateKey,
        hostKey: node.hostKey,
        bastion: through(closedBastion),
      }),
      (e: Error) => e instanceof BastionError && /refused to open a connection to 127\.0\.0\.1:\d+/.test(e.message),
    );
  });

  it("says the node behind a working bastion refused, not the bastion, when its SSH port is closed", async () => {
    // A port nothing listens on: taken, then given back.
    const closed = await new Promise<number>((resolve) => {
      const srv = createServer().listen(0, "127.0.0.1", () => {
        const port = (srv.address() as { port: number }).port;
        srv.close(() => resolve(port));
      });
    });
    const refused = (e: Error) =>
      e instanceof UnreachableThroughBastionError &&
      e.message ===
        `bastion root@127.0.0.1:${openBastion.port} could not connect to 127.0.0.1:${closed} ` + "(Connection refused)";
    await assert.rejects(
      SshSession.connect({
        host: "127.0.0.1",
        port: closed,
        user: "root",
        privateKey: client.privateKey,
        hostKey: node.hostKey,
        bastion: through(openBastion),
      }),
      refused,
    );
    await assert.rejects(scanHostKey("127.0.0.1", closed, { bastion: through(openBastion) }), refused);
  });

  it("logs in with the ssh-agent's key alone (SSH_AUTH_SOCK), at the bastion and the node", async () => {
    process.env.SSH_AUTH_SOCK = agent.socket;
    const s = await SshSession.connect({
      host: "127.0.0.1",
      port: node.port,
      user: "root",
      agent: true,
      hostKey: node.hostKey,
      bastion: { host: "127.0.0.1", port: bastion.port, user: "root", agent: true, hostKey: bastion.hostKey },
    });
    try {
      assert.equal((await s.run("echo agent", "echo")).trim(), "agent");
    } finally {
      s.close();
    }
    // A wrong key first, then the agent's: the agent is tried after the key.
    const s2 = await SshSession.connect({
      host: "127.0.0.1",
      port: node.port,
      user: "root",
      privateKey: stranger.privateKey,
      agent: true,
      hostKey: node.hostKey,
    });
    s2.close();
  });

  it("says how to start an agent when SSH_AUTH_SOCK is not set", async () => {
    delete process.env.SSH_AUTH_SOCK;
    await assert.rejects(
      SshSession.connect({ host: "127.0.0.1", port: node.port, user: "root", agent: true, hostKey: node.hostKey }),
      (e: Error) => e instanceof SshCredentialsError && /SSH_AUTH_SOCK is not set.*ssh-add/.test(e.message),
    );
    await assert.rejects(
      SshSession.connect({ host: "127.0.0.1", port: node.port, user: "root", hostKey: node.hostKey }),
      (e: Error) => e instanceof SshCredentialsError && /no SSH credential/.test(e.message),
    );
  });

  it("scans a host key without trusting it, directly and through the bastion", async () => {
    const direct = await scanHostKey("127.0.0.1", node.port);
    assert.equal(fingerprintOf(direct), fingerprintOf(node.hostKey));
    const via = await scanHostKey("127.0.0.1", node.port, { bastion: through(bastion) });
    assert.equal(fingerprintOf(via), fingerprintOf(node.hostKey));
    assert.match(fingerprintOf(via), /^SHA256:[A-Za-z0-9+/]{43}$/);
    assert.equal(fingerprintOf(via), execFingerprint(node.hostKey), "the same fingerprint as ssh-keygen -lf prints");
  });

  // A relay in front of the node that the test cuts: it sends FIN to the bastion's forwarded
  // connection, as a node going down does. The bastion passes that on as an EOF alone and
  // waits for this side's close, so the client sees "end" and no "close" (session 23).
  async function cuttable(afterServerChunks?: number) {
    const cuts: (() => void)[] = [];
    const server = createServer((down) => {
      const up = connect(node.port, "127.0.0.1");
      const cut = () => {
        up.destroy();
        down.end();
      };
      cuts.push(cut);
      let chunks = 0;
      up.on("data", (d: Buffer) => {
        down.write(d);
        if (afterServerChunks !== undefined && ++chunks >= afterServerChunks) cut();
      });
      down.on("data", (d: Buffer) => up.write(d));
      down.on("error", () => up.destroy());
      up.on("error", () => down.destroy());
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    const port = (server.address() as { port: number }).port;
    return { port, cut: () => cuts.forEach((c) => c()), close: () => server.close() };
  }

  /** The test node, reached through the open bastion at the relay's port. */
  const nodeBehindRelay = (port: number) =>
    SshSession.connect({
      host: "127.0.0.1",
      port,
      user: "root",
      privateKey: client.privateKey,
      hostKey: node.hostKey,
      bastion: through(openBastion),
    });

  const settledWithin = <T>(p: Promise<T>, ms: number) =>
    Promise.race([
      p.then(
        (v) => ({ value: v }),
        (e: Error) => ({ error: e }),
      ),
      new Promise<"pending">((r) => setTimeout(() => r("pending"), ms).unref()),
    ]);

  it("fails at once to connect to a node behind the bastion that closes after its banner", async () => {
    const relay = await cuttable(2); // banner, then KEXINIT: the client is in the key exchange
    try {
      const t = Date.now();
      const r = await settledWithin(nodeBehindRelay(relay.port), 15_000);
      assert.notEqual(r, "pending", "the connect never settled");
      assert.ok(r !== "pending" && "error" in r, "it failed");
      assert.ok(r.error instanceof SshHandshakeClosedError, `${r.error.name}: ${r.error.message}`);
      assert.match(
        r.error.message,
        /^the connection to 127\.0\.0\.1:\d+ \(through the bastion\) was closed during the SSH handshake/,
      );
      assert.ok(Date.now() - t < 5_000, `in ${Date.now() - t} ms`);
    } finally {
      relay.close();
    }
  });

  it("ends a command whose node goes away behind the bastion, instead of waiting with it", async () => {
    const relay = await cuttable();
    const s = await nodeBehindRelay(relay.port);
    try {
      const t = Date.now();
      const running = s.exec("sleep 30");
      setTimeout(() => relay.cut(), 300);
      const r = await settledWithin(running, 15_000);
      assert.notEqual(r, "pending", "the command never ended");
      assert.ok(Date.now() - t < 5_000, `in ${Date.now() - t} ms`);
      assert.equal(s.open, false, "the session knows its node is gone");
    } finally {
      s.close();
      relay.close();
    }
  });

  it("gives hooks an ssh_config that OpenSSH follows through the bastion, both host keys pinned", () => {
    const files = new HookFiles();
    try {
      const nodes = [{ name: "cp-1", host: "127.0.0.1", port: node.port, user: "root", hostPublicKey: node.hostKey }];
      const bastionAccess = (hostKey: string, agent = false) => ({
        agent,
        bastion: { host: "127.0.0.1", port: bastion.port, user: "root", hostKey, agent },
      });
      const ssh = (config: string, env: NodeJS.ProcessEnv = {}) =>
        spawnSync("ssh", ["-F", config, "cp-1", "echo", "hook-through-the-bastion"], {
          encoding: "utf8",
          env: { PATH: process.env.PATH, ...env },
          timeout: 30_000,
        });
      const ok = ssh(writeSshConfig(files, client.privateKey, nodes, bastionAccess(bastion.hostKey)));
      assert.equal(ok.status, 0, ok.stderr);
      assert.equal(ok.stdout.trim(), "hook-through-the-bastion");
      // The bastion's key is pinned: another one is refused before anything runs.
      const wrong = ssh(writeSshConfig(files, client.privateKey, nodes, bastionAccess(closedBastion.hostKey)));
      assert.notEqual(wrong.status, 0);
      assert.match(wrong.stderr, /host key|REMOTE HOST IDENTIFICATION/i);
      // The node's port is reachable directly here too: the config must say it goes through the bastion.
      const text = readFileSync(
        writeSshConfig(files, client.privateKey, nodes, bastionAccess(bastion.hostKey)),
        "utf8",
      );
      assert.match(text, /Host cp-1[\s\S]*ProxyJump molt_bastion/);
      // With molt:ssh.agent the agent's key is offered too: a stack key nobody authorized still gets in.
      const viaAgent = ssh(writeSshConfig(files, stranger.privateKey, nodes, bastionAccess(bastion.hostKey, true)), {
        SSH_AUTH_SOCK: agent.socket,
      });
      assert.equal(viaAgent.status, 0, viaAgent.stderr);
      const noAgent = ssh(writeSshConfig(files, stranger.privateKey, nodes, bastionAccess(bastion.hostKey)), {
        SSH_AUTH_SOCK: agent.socket,
      });
      assert.notEqual(noAgent.status, 0, "without molt:ssh.agent only the stack's key is offered");
    } finally {
      files.remove();
    }
  });
});

function execFingerprint(publicKey: string): string {
  const out = execFileSync("ssh-keygen", ["-lf", "-"], {
    input: publicKey + "\n",
    encoding: "utf8",
  });
  return out.split(" ")[1];
}
