// The host key a node got through its user data opens the first connection only: over it,
// pinned, molt installs the next key and pins that one (infra/remote/host-key-rotation.ts).
// Against a real OpenSSH server on loopback, run by hand with its own key files.
import * as assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  connectDuringFirstBoot,
  connectRotating,
  renderHostKeyInstallScript,
  rotatedHostKey,
} from "../../infra/remote/host-key-rotation";
import { generateSshKeyPair, HostKeyMismatchError, SshSession, type SshTarget } from "../../infra/remote/ssh";
import { pollUntil } from "../../lib/poll";
import { shellcheck } from "./kubeadm/shell";

const client = generateSshKeyPair("molt@test");
const first = generateSshKeyPair("first");

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

describe("host key rotation over the first pinned connection", () => {
  it("derives one next key per node and client key, a key OpenSSH loads", () => {
    const a = rotatedHostKey(client.privateKey, first.publicKey);
    assert.deepEqual(rotatedHostKey(`${client.privateKey}\n`, first.publicKey), a, "the same inputs, the same key");
    assert.notEqual(rotatedHostKey(client.privateKey, generateSshKeyPair("other").publicKey).publicKey, a.publicKey);
    assert.notEqual(rotatedHostKey(generateSshKeyPair("c2").privateKey, first.publicKey).publicKey, a.publicKey);
    const dir = mkdtempSync(join(tmpdir(), "molt-rot-"));
    try {
      writeFileSync(join(dir, "k"), a.privateKey, { mode: 0o600 });
      const derived = spawnSync("ssh-keygen", ["-y", "-f", join(dir, "k")], { encoding: "utf8" });
      assert.equal(derived.status, 0, derived.stderr);
      assert.equal(derived.stdout.split(" ")[1], a.publicKey.split(" ")[1]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("renders a shellcheck-clean install script that refuses a key other than the one molt pins next", () => {
    const next = rotatedHostKey(client.privateKey, first.publicKey);
    assert.equal(shellcheck(renderHostKeyInstallScript(next.publicKey)), "");
    assert.match(
      renderHostKeyInstallScript(next.publicKey),
      /readonly HOST_KEY_FILE='\/etc\/ssh\/ssh_host_ed25519_key'/,
    );
    const dir = mkdtempSync(join(tmpdir(), "molt-rot-"));
    try {
      writeFileSync(join(dir, "host"), first.privateKey, { mode: 0o600 });
      const script = renderHostKeyInstallScript(next.publicKey, {
        hostKeyFile: join(dir, "host"),
        pidFile: "/nonexistent",
      });
      const r = spawnSync("bash", ["--norc", "-c", script], {
        input: generateSshKeyPair("intruder").privateKey,
        encoding: "utf8",
      });
      assert.notEqual(r.status, 0);
      assert.match(r.stderr, /not the one molt pins next: not installing it/);
      assert.equal(readFileSync(join(dir, "host"), "utf8"), first.privateKey, "the node keeps its key");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  describe("against a real sshd", function () {
    this.timeout(60_000);
    let dir: string;
    let sshd: ChildProcess;
    let target: SshTarget;
    const files = () => ({ hostKeyFile: join(dir, "host_ed25519"), pidFile: join(dir, "sshd.pid") });

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), "molt-sshd-"));
      chmodSync(dir, 0o700);
      mkdirSync("/run/sshd", { recursive: true, mode: 0o755 });
      writeFileSync(files().hostKeyFile, first.privateKey, { mode: 0o600 });
      writeFileSync(join(dir, "authorized_keys"), `${client.publicKey}\n`, { mode: 0o600 });
      const port = await freePort();
      writeFileSync(
        join(dir, "sshd_config"),
        [
          `Port ${port}`,
          "ListenAddress 127.0.0.1",
          `HostKey ${files().hostKeyFile}`,
          `PidFile ${files().pidFile}`,
          `AuthorizedKeysFile ${join(dir, "authorized_keys")}`,
          "PermitRootLogin prohibit-password",
          "PasswordAuthentication no",
          "KbdInteractiveAuthentication no",
          "StrictModes no",
          "UsePAM no",
          "",
        ].join("\n"),
      );
      sshd = spawn("/usr/sbin/sshd", ["-D", "-e", "-f", join(dir, "sshd_config")], { stdio: "ignore" });
      target = { host: "127.0.0.1", port, user: "root", privateKey: client.privateKey, hostKey: first.publicKey };
      // Up once it answers with the first key.
      const s = await pollUntil(async () => SshSession.connect(target).catch(() => undefined), {
        what: "the test sshd to answer",
        deadlineMs: 20_000,
      });
      s.close();
    });
    after(() => {
      sshd?.kill();
      rmSync(dir, { recursive: true, force: true });
    });

    it(
      "installs the next key over the first connection, then pins it; the first key no longer opens the " + "node",
      async () => {
        const next = rotatedHostKey(client.privateKey, first.publicKey);
        const { session, hostKey } = await connectRotating(target, { deadlineMs: 20_000, sshd: files() });
        try {
          assert.equal(hostKey, next.publicKey);
          assert.equal(session.acceptedHostKey, next.publicKey);
          assert.equal((await session.run("echo ok", "probe")).trim(), "ok");
        } finally {
          session.close();
        }
        assert.equal(statSync(files().hostKeyFile).mode & 0o777, 0o600);
        assert.ok(
          readFileSync(`${files().hostKeyFile}.pub`, "utf8").startsWith(
            next.publicKey.split(" ").slice(0, 2).join(" "),
          ),
        );
        await assert.rejects(SshSession.connect(target), HostKeyMismatchError);
      },
    );

    it("a create retried after the rotation accepts the rotated key and installs nothing again", async () => {
      const before = statSync(files().hostKeyFile).mtimeMs;
      const { session, hostKey } = await connectRotating(target, { deadlineMs: 20_000, sshd: files() });
      session.close();
      assert.equal(hostKey, rotatedHostKey(client.privateKey, first.publicKey).publicKey);
      assert.equal(statSync(files().hostKeyFile).mtimeMs, before);
    });
  });

  describe("first boot", () => {
    const mismatchThen = (failures: number) => {
      let calls = 0;
      const connect = async (t: SshTarget) => {
        calls++;
        if (calls <= failures) throw new HostKeyMismatchError(t.host);
        return { acceptedHostKey: t.hostKey, close() {} } as unknown as SshSession;
      };
      return { connect, calls: () => calls };
    };
    const t: SshTarget = { host: "10.0.0.9", user: "u", privateKey: client.privateKey, hostKey: first.publicKey };

    it("retries a host key the image offers before cloud-init installs the pinned one", async () => {
      const m = mismatchThen(3);
      const s = await connectDuringFirstBoot(t, 5_000, m.connect);
      assert.equal(s.acceptedHostKey, first.publicKey);
      assert.equal(m.calls(), 4);
    });

    it("reports a mismatch that outlasts first boot as one, and never retries one past first boot", async () => {
      await assert.rejects(
        connectDuringFirstBoot(t, 300, mismatchThen(1000).connect),
        /still offered another host key/,
      );
      const m = mismatchThen(1);
      await assert.rejects(
        connectDuringFirstBoot(t, 5_000, m.connect, { retryHostKeyMismatch: false }),
        HostKeyMismatchError,
      );
      assert.equal(m.calls(), 1);
    });
  });
});
