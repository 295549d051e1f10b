// The one SSH edge of molt: every connection pins the node's host key. There is no code
// path that accepts an unknown key, so a node that answers with another key is refused.
import { Client, type ClientChannel, type ConnectConfig, utils } from "ssh2";
import { createServer, type AddressInfo, type Server } from "node:net";
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync } from "node:crypto";
import { createWriteStream } from "node:fs";

export interface SshTarget {
  host: string;
  port?: number;
  user: string;
  /** OpenSSH private key (secret). */
  privateKey: string;
  /** The node's host public key, "ssh-ed25519 AAAA... [comment]". */
  hostKey: string;
  /** Other host keys this connection may meet (a key being rotated); still never an unknown one. */
  alsoAccept?: string[];
}

export class HostKeyMismatchError extends Error {
  constructor(readonly host: string) {
    super(
      `host key of ${host} does not match the pinned key: refusing to connect (a replaced machine, or someone in the middle)`,
    );
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
  private ended = false;

  private constructor(
    private readonly client: Client,
    readonly target: SshTarget,
    /** The pinned key line the node presented (target.hostKey or one of alsoAccept). */
    readonly acceptedHostKey: string,
  ) {
    client.once("close", () => (this.ended = true));
  }

  /** False once the connection is gone (the node went away, or close() was called). */
  get open(): boolean {
    return !this.ended;
  }

  static async connect(target: SshTarget, opts: { readyTimeoutMs?: number } = {}): Promise<SshSession> {
    const pinned = [target.hostKey, ...(target.alsoAccept ?? [])].map((line) => ({ line, blob: publicKeyBlob(line) }));
    const client = new Client();
    let mismatch = false;
    let accepted = target.hostKey;
    const config: ConnectConfig = {
      host: target.host,
      port: target.port ?? 22,
      username: target.user,
      privateKey: target.privateKey,
      readyTimeout: opts.readyTimeoutMs ?? 20_000,
      keepaliveInterval: 5_000,
      keepaliveCountMax: 3,
      hostVerifier: (key: Buffer) => {
        const match = pinned.find((p) => Buffer.compare(key, p.blob) === 0);
        if (match) accepted = match.line;
        else mismatch = true;
        return match !== undefined;
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
    return new SshSession(client, target, accepted);
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

  /**
   * Runs a command and streams its stdout into a local file (with flow control: large,
   * binary output such as a database snapshot). Resolves with the bytes written.
   */
  execToFile(command: string, path: string, what: string): Promise<number> {
    return new Promise((resolve, reject) => {
      const onExec = (err: Error | undefined, stream: ClientChannel) => {
        if (err) return reject(err);
        const out = createWriteStream(path, { mode: 0o600 });
        let bytes = 0;
        let stderr = "";
        stream.on("data", (d: Buffer) => (bytes += d.length));
        stream.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
        stream.pipe(out);
        let code: number | null = null;
        stream.on("exit", (c: number | null) => (code = c));
        out.on("finish", () =>
          code === 0 || code === null
            ? resolve(bytes)
            : reject(new RemoteCommandError(this.target.host, what, code, stderr)),
        );
        out.on("error", reject);
        stream.on("close", (c: number | null) => {
          if ((c ?? code) !== 0) reject(new RemoteCommandError(this.target.host, what, c ?? code, stderr));
        });
      };
      try {
        this.client.exec(command, onExec);
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
    this.ended = true;
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

/**
 * Generates an ed25519 key pair in OpenSSH format from node:crypto. (ssh2's own generator
 * drops leading zero bytes of the key material, so about one key in 128 is one OpenSSH
 * refuses to load: "error in libcrypto".)
 */
export function generateSshKeyPair(comment: string): { privateKey: string; publicKey: string } {
  // Encoded inside the generation itself: exporting a fresh KeyObject (e.g. as JWK) can
  // deadlock Node 20 when a garbage collection finalises its key-generation job meanwhile.
  // SPKI/PKCS#8 DER of an ed25519 key end with the 32-byte public key / seed.
  const { publicKey, privateKey } = generateKeyPairSync("ed25519", {
    publicKeyEncoding: { type: "spki", format: "der" },
    privateKeyEncoding: { type: "pkcs8", format: "der" },
  });
  return openSshKeyPair(
    privateKey.subarray(privateKey.length - 32),
    publicKey.subarray(publicKey.length - 32),
    comment,
  );
}

/** The ed25519 key pair of a 32-byte seed, in OpenSSH format (the same seed, the same keys). */
export function sshKeyPairFromSeed(seed: Buffer, comment: string): { privateKey: string; publicKey: string } {
  if (seed.length !== 32) throw new Error("an ed25519 seed is 32 bytes");
  // PKCS#8 DER of an ed25519 private key: a fixed prefix, then the seed; SPKI DER of the
  // public key ends with its 32 bytes.
  const pkcs8 = Buffer.concat([Buffer.from("302e020100300506032b657004220420", "hex"), seed]);
  const spki = createPublicKey(createPrivateKey({ key: pkcs8, format: "der", type: "pkcs8" })).export({
    type: "spki",
    format: "der",
  });
  return openSshKeyPair(seed, spki.subarray(spki.length - 32), comment);
}

function openSshKeyPair(seed: Buffer, pub: Buffer, comment: string): { privateKey: string; publicKey: string } {
  if (pub.length !== 32 || seed.length !== 32) throw new Error("unexpected ed25519 key length");
  const str = (b: Buffer | string) => {
    const buf = typeof b === "string" ? Buffer.from(b) : b;
    const len = Buffer.alloc(4);
    len.writeUInt32BE(buf.length);
    return Buffer.concat([len, buf]);
  };
  const u32 = (n: number) => {
    const b = Buffer.alloc(4);
    b.writeUInt32BE(n);
    return b;
  };
  const pubBlob = Buffer.concat([str("ssh-ed25519"), str(pub)]);
  // The check integer only guards decryption; derived from the seed, the same seed gives the same file.
  const check = createHash("sha256").update(seed).digest().readUInt32BE(0);
  let section = Buffer.concat([
    u32(check),
    u32(check),
    str("ssh-ed25519"),
    str(pub),
    str(Buffer.concat([seed, pub])),
    str(comment),
  ]);
  const pad = (8 - (section.length % 8)) % 8;
  section = Buffer.concat([section, Buffer.from(Array.from({ length: pad }, (_, i) => i + 1))]);
  const body = Buffer.concat([
    Buffer.from("openssh-key-v1\0"),
    str("none"),
    str("none"),
    str(""),
    u32(1),
    str(pubBlob),
    str(section),
  ]).toString("base64");
  const wrapped = body.match(/.{1,70}/g)!.join("\n");
  return {
    privateKey: `-----BEGIN OPENSSH PRIVATE KEY-----\n${wrapped}\n-----END OPENSSH PRIVATE KEY-----\n`,
    publicKey: `ssh-ed25519 ${pubBlob.toString("base64")} ${comment}`,
  };
}
