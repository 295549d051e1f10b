// Real OpenSSH servers and an ssh-agent for tests on loopback: a pinned host key each, one
// authorized client key, and (for a bastion) local forwarding to the ports it may open.
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { connect, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generateSshKeyPair } from "../../infra/remote/ssh";
import { pollUntil } from "../../lib/poll";

export interface TestSshd {
  port: number;
  hostKey: string;
  /** What sshd logged so far (LogLevel VERBOSE: every session it starts, among others). */
  log(): string;
  stop(): Promise<void>;
}

/** A free TCP port on 127.0.0.1 (taken and released, then handed to sshd). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

async function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const c = connect({ host: "127.0.0.1", port });
    c.once("data", (d: Buffer) => (c.destroy(), resolve(d.toString().startsWith("SSH-2.0-"))));
    c.once("error", () => resolve(false));
  });
}

/**
 * Starts `sshd -D` on 127.0.0.1 with a fresh host key and `authorizedKey`. `permitOpen`
 * lists the host:port a client may forward to ("none": no forwarding at all).
 */
export async function startSshd(o: { authorizedKey: string; permitOpen?: string }): Promise<TestSshd> {
  // sshd's privilege separation directory (made by the openssh-server service otherwise).
  mkdirSync("/run/sshd", { recursive: true, mode: 0o755 });
  const dir = mkdtempSync(join(tmpdir(), "molt-sshd-"));
  const host = generateSshKeyPair("test sshd");
  const port = await freePort();
  writeFileSync(join(dir, "host_key"), host.privateKey, { mode: 0o600 });
  writeFileSync(join(dir, "authorized_keys"), o.authorizedKey.trim() + "\n", { mode: 0o600 });
  writeFileSync(
    join(dir, "sshd_config"),
    [
      `ListenAddress 127.0.0.1:${port}`,
      `HostKey ${join(dir, "host_key")}`,
      `AuthorizedKeysFile ${join(dir, "authorized_keys")}`,
      "PermitRootLogin prohibit-password",
      "PasswordAuthentication no",
      "KbdInteractiveAuthentication no",
      "UsePAM no",
      "StrictModes no",
      `PidFile ${join(dir, "sshd.pid")}`,
      "AllowTcpForwarding local",
      `PermitOpen ${o.permitOpen ?? "any"}`,
      "LogLevel VERBOSE",
      "",
    ].join("\n"),
  );
  const child: ChildProcess = spawn("/usr/sbin/sshd", ["-D", "-e", "-f", join(dir, "sshd_config")], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let log = "";
  child.stderr!.on("data", (d: Buffer) => (log += d.toString()));
  await pollUntil(
    async () => {
      if (child.exitCode !== null) throw new Error(`sshd exited (${child.exitCode})`);
      return (await listening(port)) ? true : undefined;
    },
    {
      what: `sshd on 127.0.0.1:${port}`,
      deadlineMs: 10_000,
    },
  ).catch((e: Error) => {
    child.kill("SIGKILL");
    throw new Error(`${e.message}: ${log}`);
  });
  return {
    port,
    hostKey: host.publicKey,
    log: () => log,
    stop: async () => {
      if (child.exitCode === null) {
        const gone = new Promise((r) => child.once("exit", r));
        child.kill("SIGTERM");
        await gone;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface TestAgent {
  socket: string;
  stop(): void;
}

/** An ssh-agent holding `privateKey` (added with ssh-add, from a file removed right after). */
export function startAgent(privateKey: string): TestAgent {
  const dir = mkdtempSync(join(tmpdir(), "molt-agent-"));
  const socket = join(dir, "agent.sock");
  const out = execFileSync("ssh-agent", ["-s", "-a", socket], { encoding: "utf8" });
  const pid = Number(/SSH_AGENT_PID=(\d+)/.exec(out)?.[1]);
  writeFileSync(join(dir, "key"), privateKey, { mode: 0o600 });
  execFileSync("ssh-add", ["-q", join(dir, "key")], { env: { ...process.env, SSH_AUTH_SOCK: socket } });
  rmSync(join(dir, "key"));
  return {
    socket,
    stop: () => {
      try {
        process.kill(pid, "SIGTERM");
      } catch {
        /* already gone */
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
