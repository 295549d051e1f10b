// A connection that only forwards ports starts one session (infra/remote/ssh.ts
// startSession), so that a real OpenSSH sshd turns TCP_NODELAY on for its end: once per
// connection, never on one that ran a command already, and never again on later passes.
import * as assert from "node:assert/strict";
import { generateSshKeyPair, SshSession } from "../../infra/remote/ssh";
import { pollUntil } from "../../lib/poll";
import { startSshd, type TestSshd } from "../support/sshd";

describe("a forwarding SSH connection starts one session (infra/remote/ssh.ts)", function () {
  this.timeout(60_000);
  const client = generateSshKeyPair("molt test client");
  let sshd: TestSshd;
  before(async () => (sshd = await startSshd({ authorizedKey: client.publicKey })));
  after(async () => sshd?.stop());

  const sessions = () => (sshd.log().match(/Starting session: command for root/g) ?? []).length;
  const connect = () =>
    SshSession.connect({
      host: "127.0.0.1",
      port: sshd.port,
      user: "root",
      privateKey: client.privateKey,
      hostKey: sshd.hostKey,
    });
  const closed = (before: number) =>
    pollUntil(() => ((sshd.log().match(/Close session: user root/g) ?? []).length > before ? true : undefined), {
      what: "sshd to close the session",
      deadlineMs: 10_000,
    });

  it("starts one on a connection that only forwards, however often it is asked", async () => {
    const ssh = await connect();
    const tunnel = await ssh.forward("127.0.0.1", sshd.port);
    const before = sessions();
    const closes = (sshd.log().match(/Close session: user root/g) ?? []).length;
    ssh.startSession();
    ssh.startSession();
    await closed(closes);
    ssh.startSession();
    assert.equal(sessions() - before, 1);
    await tunnel.close();
    ssh.close();
  });

  it("starts none on a connection that ran a command", async () => {
    const ssh = await connect();
    const closes = (sshd.log().match(/Close session: user root/g) ?? []).length;
    assert.equal((await ssh.exec("echo ok")).stdout.trim(), "ok");
    await closed(closes);
    const before = sessions();
    ssh.startSession();
    // What startSession would have started is at most a round trip away: another command shows it.
    await ssh.exec("true");
    assert.equal(sessions() - before, 1, "only the second command");
    ssh.close();
  });
});
