// The one SSH edge of molt: every connection pins the node's host key. There is no code
// path that accepts an unknown key, so a node that answers with another key is refused.
import { Client, type ClientChannel, type ConnectConfig, utils } from "ssh2";
import { createServer, type AddressInfo, type Server } from "node:net";

export interface SshTarget {
  host: string;
  port?: number;
  user: string;
  /** OpenSSH private key (secret). */
  privateKey: string;
  /** The node's host public key, "ssh-ed25519 AAAA... [comment]". */
  hostKey: string;
}

export class HostKeyMismatchError extends Error {
  constructor(readonly host: string) {
    super(`host key of ${host} does not match the pinned key: refusing to connect (a replaced machine, or someone in the middle)`);
    this.name = "HostKeyMismatchError";
  }
}

export class RemoteCommandError extends Error {
  constructor(
    readonly host: string,
    readonly what: string,
    readonly exitCode: number | null,
    readonly stderr: string,
  ) {
    super(`${what} on ${host} failed (exit ${exitCode ?? "signal"}): ${lastLines(stderr, 15)}`);
    this.name = "RemoteCommandError";
  }
}

function lastLines(text: string, n: number): string {
  return text.trim().split("\n").slice(-n).join("\n");
}

/** The raw key blob of an authorized_keys-style public key line. */
export function publicKeyBlob(line: string): Buffer {
  const parsed = utils.parseKey(line.trim());
  if (parsed instanceof Error) throw new Error(`not a valid SSH public key: ${parsed.message}`);
  const key = Array.isArray(parsed) ? parsed[0] : parsed;
  return key.getPublicSSH();
}

export interface ExecResult {
  stdout: string;
  stderr: string;
  code: number | null;
}

export interface ExecOptions {
  stdin?: string;
  env?: Record<string, string>;
  /** Streamed stderr lines (never used for secrets: scripts must not print them). */
  onStderr?: (chunk: string) => void;
  signal?: AbortSignal;
}

/** A connected SSH session to one node. */
export class SshSession {
  private constructor(
    private readonly client: Client,
    readonly target: SshTarget,
  ) {}

  static async connect(target: SshTarget, opts: { readyTimeoutMs?: number } = {}): Promise<SshSession> {
    const expected = publicKeyBlob(target.hostKey);
    const client = new Client();
    let mismatch = false;
    const config: ConnectConfig = {
      host: target.host,
      port: target.port ?? 22,
      username: target.user,
      privateKey: target.privateKey,
      readyTimeout: opts.readyTimeoutMs ?? 20_000,
      keepaliveInterval: 5_000,
      keepaliveCountMax: 3,
      hostVerifier: (key: Buffer) => {
        const ok = Buffer.compare(key, expected) === 0;
        if (!ok) mismatch = true;
        return ok;
      },
    };
    await new Promise<void>((resolve, reject) => {
      const onError = (err: Error) => {
        client.removeListener("ready", onReady);
        reject(mismatch ? new HostKeyMismatchError(target.host) : err);
      };
      const onReady = () => {
        client.removeListener("error", onError);
        resolve();
      };
      client.once("ready", onReady);
      client.once("error", onError);
      client.connect(config);
    });
    client.on("error", () => {
      /* later errors surface on the calls that hit them */
    });
    return new SshSession(client, target);
  }

  /** Runs a command; resolves with its output whatever the exit code. */
  exec(command: string, opts: ExecOptions = {}): Promise<ExecResult> {
    return new Promise((resolve, reject) => {
      // Environment is passed as a prefix of exported variables read from stdin-free
      // assignments, because sshd drops most client-sent variables (AcceptEnv).
      const prefix = opts.env ? envPrefix(opts.env) : "";
      const onExec = (err: Error | undefined, stream: ClientChannel) => {
        if (err) return reject(err);
        let stdout = "";
        let stderr = "";
        const abort = () => stream.close();
        opts.signal?.addEventListener("abort", abort, { once: true });
        stream.on("data", (d: Buffer) => (stdout += d.toString()));
        stream.stderr.on("data", (d: Buffer) => {
          const s = d.toString();
          stderr += s;
          opts.onStderr?.(s);
        });
        stream.on("close", (code: number | null) => {
          opts.signal?.removeEventListener("abort", abort);
          resolve({ stdout, stderr, code });
        });
        if (opts.stdin !== undefined) stream.end(opts.stdin);
        else stream.end();
      };
      try {
        // ssh2 throws synchronously once the connection is gone.
        this.client.exec(prefix + command, onExec);
      } catch (e) {
        reject(e);
      }
    });
  }

  /** Runs a command and throws RemoteCommandError unless it exits 0. */
  async run(command: string, what: string, opts: ExecOptions = {}): Promise<string> {
    const r = await this.exec(command, opts);
    if (r.code !== 0) throw new RemoteCommandError(this.target.host, what, r.code, r.stderr);
    return r.stdout;
  }

  /**
   * A local TCP port on 127.0.0.1 that forwards to remoteHost:remotePort as seen from
   * the node (e.g. its loopback-only etcd client port). Close it with the returned close().
   */
  async forward(remoteHost: string, remotePort: number): Promise<{ port: number; close: () => Promise<void> }> {
    const open = new Set<import("node:net").Socket>();
    const server: Server = createServer((sock) => {
      open.add(sock);
      sock.on("close", () => open.delete(sock));
      const onChannel = (err: Error | undefined, channel: ClientChannel) => {
        if (err) {
          sock.destroy();
          return;
        }
        sock.pipe(channel).pipe(sock);
        sock.on("error", () => channel.close());
        channel.on("error", () => sock.destroy());
      };
      sock.on("error", () => sock.destroy());
      try {
        // ssh2 throws synchronously once the connection is gone: the client sees a reset.
        this.client.forwardOut("127.0.0.1", 0, remoteHost, remotePort, onChannel);
      } catch {
        sock.destroy();
      }
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    const port = (server.address() as AddressInfo).port;
    return {
      port,
      // Closing the tunnel cuts its live connections too (server.close alone waits for them).
      close: () =>
        new Promise<void>((resolve) => {
          server.close(() => resolve());
          for (const s of open) s.destroy();
        }),
    };
  }

  close(): void {
    this.client.end();
  }
}

/** `export A='x' B='y';` with single-quote escaping. */
export function envPrefix(env: Record<string, string>): string {
  const parts = Object.entries(env).map(([k, v]) => {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(k)) throw new Error(`invalid environment variable name: ${k}`);
    return `${k}=${shellQuote(v)}`;
  });
  return parts.length ? `export ${parts.join(" ")}; ` : "";
}

export function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** Generates an ed25519 key pair in OpenSSH format. */
export function generateSshKeyPair(comment: string): { privateKey: string; publicKey: string } {
  const k = utils.generateKeyPairSync("ed25519", { comment });
  return { privateKey: k.private, publicKey: k.public };
}
