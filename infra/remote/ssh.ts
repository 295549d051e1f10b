// The one SSH edge of molt: every connection pins the node's host key, and the bastion's
// when it goes through one. There is no code path that accepts an unknown key, so a node
// (or bastion) that answers with another key is refused.
import { Client, type ClientChannel, type ConnectConfig, utils } from "ssh2";
import { createServer, type AddressInfo, type Server } from "node:net";
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync } from "node:crypto";
import { createWriteStream } from "node:fs";

/**
 * Where a client key comes from. `agent: true` is the ssh-agent at $SSH_AUTH_SOCK when the
 * connection is made (what state and config record: a socket path belongs to one host and
 * session); a string is that socket. With both a key and an agent, the key is tried first.
 */
export interface SshCredentials {
  /** OpenSSH private key (secret). */
  privateKey?: string;
  agent?: true | string;
}

/** A jump host every connection goes through (OpenSSH's ProxyJump, KubeOne's bastion). */
export interface BastionTarget extends SshCredentials {
  host: string;
  port?: number;
  user: string;
  /** The bastion's host public key: pinned like a node's. */
  hostKey: string;
}

export interface SshTarget extends SshCredentials {
  host: string;
  port?: number;
  user: string;
  /** The node's host public key, "ssh-ed25519 AAAA... [comment]". */
  hostKey: string;
  /** Other host keys this connection may meet (a key being rotated); still never an unknown one. */
  alsoAccept?: string[];
  /** Reach the node through this jump host (the node's address as the bastion sees it). */
  bastion?: BastionTarget;
}

export class HostKeyMismatchError extends Error {
  constructor(
    readonly host: string,
    /** "bastion " when it is the jump host's key. */
    role = "",
  ) {
    super(
      `host key of ${role}${host} does not match the pinned key: refusing to connect ` +
        "(a replaced machine, or someone in the middle)",
    );
    this.name = "HostKeyMismatchError";
  }
}

/** The bastion could not be reached, refused molt, or refused to forward to the node. */
export class BastionError extends Error {
  constructor(
    readonly bastion: string,
    detail: string,
  ) {
    super(`bastion ${bastion}: ${detail}`);
    this.name = "BastionError";
  }
}

export class SshCredentialsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SshCredentialsError";
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

/** The socket of `agent`, or an error that says how to provide one. */
export function agentSocket(agent: true | string | undefined, what: string): string | undefined {
  if (agent === undefined) return undefined;
  if (typeof agent === "string") return agent;
  const sock = process.env.SSH_AUTH_SOCK;
  if (!sock)
    throw new SshCredentialsError(
      `${what} uses the ssh-agent, but SSH_AUTH_SOCK is not set: start one (eval "$(ssh-agent)") and ssh-add the key`,
    );
  return sock;
}

function credentialsOf(c: SshCredentials, what: string): Pick<ConnectConfig, "privateKey" | "agent"> {
  const agent = agentSocket(c.agent, what);
  if (!c.privateKey && !agent)
    throw new SshCredentialsError(`no SSH credential for ${what}: give a private key or use the ssh-agent`);
  return { ...(c.privateKey ? { privateKey: c.privateKey } : {}), ...(agent ? { agent } : {}) };
}

/** OpenSSH's SHA256 fingerprint of a public key line ("SHA256:base64-without-padding"). */
export function fingerprintOf(line: string): string {
  return fingerprintOfBlob(publicKeyBlob(line));
}

export function fingerprintOfBlob(blob: Buffer): string {
  return "SHA256:" + createHash("sha256").update(blob).digest("base64").replace(/=+$/, "");
}

/**
 * Connects one ssh2 client; resolves once authenticated. `hostVerifier` sees the raw host
 * key and decides; a refusal by it rejects with what `refused()` makes.
 */
function connectClient(
  config: ConnectConfig,
  hostVerifier: (key: Buffer) => boolean,
  refused: () => Error,
): Promise<Client> {
  const client = new Client();
  let mismatch = false;
  return new Promise<Client>((resolve, reject) => {
    const onError = (err: Error) => {
      client.removeListener("ready", onReady);
      client.end();
      reject(mismatch ? refused() : err);
    };
    const onReady = () => {
      client.removeListener("error", onError);
      client.on("error", () => {
        /* later errors surface on the calls that hit them */
      });
      resolve(client);
    };
    client.once("ready", onReady);
    client.once("error", onError);
    client.connect({
      ...config,
      hostVerifier: (key: Buffer) => {
        const ok = hostVerifier(key);
        if (!ok) mismatch = true;
        return ok;
      },
    });
  });
}

const pinned = (hostKey: string) => {
  const expected = publicKeyBlob(hostKey);
  return (key: Buffer) => Buffer.compare(key, expected) === 0;
};

/** Opens a channel from the bastion to host:port (the TCP connection the node's SSH runs over). */
function forwardThrough(jump: Client, bastion: string, host: string, port: number): Promise<ClientChannel> {
  return new Promise((resolve, reject) => {
    try {
      jump.forwardOut("127.0.0.1", 0, host, port, (err, channel) =>
        err
          ? reject(new BastionError(bastion, `refused to open a connection to ${host}:${port} (${err.message})`))
          : resolve(channel),
      );
    } catch (e) {
      reject(new BastionError(bastion, `connection lost (${(e as Error).message})`));
    }
  });
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

/** An OpenSSH public key line ("ssh-ed25519 AAAA...") of a raw key blob. */
export function publicKeyLine(blob: Buffer): string {
  const len = blob.readUInt32BE(0);
  return `${blob.subarray(4, 4 + len).toString()} ${blob.toString("base64")}`;
}

/**
 * The host key a server presents, like ssh-keyscan: the connection is dropped at key
 * exchange, before anything is authenticated or trusted. Through a bastion, the bastion
 * itself must be pinned already (its key is checked as for any connection).
 */
export async function scanHostKey(
  host: string,
  port: number,
  opts: { bastion?: BastionTarget; timeoutMs?: number } = {},
): Promise<string> {
  const timeout = opts.timeoutMs ?? 10_000;
  let jump: Client | undefined;
  let sock: ClientChannel | undefined;
  if (opts.bastion) {
    const b = opts.bastion;
    const name = `${b.user}@${b.host}:${b.port ?? 22}`;
    jump = await connectClient(
      { readyTimeout: timeout, host: b.host, port: b.port ?? 22, username: b.user, ...credentialsOf(b, name) },
      pinned(b.hostKey),
      () => new HostKeyMismatchError(b.host, "bastion "),
    ).catch((e: Error) => {
      throw e instanceof HostKeyMismatchError ? e : new BastionError(name, e.message);
    });
    sock = await forwardThrough(jump, name, host, port).catch((e: Error) => {
      jump?.end();
      throw e;
    });
  }
  let seen: Buffer | undefined;
  try {
    await connectClient(
      { readyTimeout: timeout, ...(sock ? { sock } : { host, port }), username: "molt-keyscan" },
      (key) => ((seen = key), false),
      () => new Error("scanned"),
    ).then((c) => c.end());
  } catch (e) {
    if (!seen) throw e;
  } finally {
    jump?.end();
  }
  if (!seen) throw new Error(`${host}:${port} presented no host key`);
  return publicKeyLine(seen);
}

/** A connected SSH session to one node (through its bastion, when it has one). */
export class SshSession {
  private ended = false;

  private constructor(
    private readonly client: Client,
    readonly target: SshTarget,
    /** The pinned key line the node presented (target.hostKey or one of alsoAccept). */
    readonly acceptedHostKey: string,
    private readonly jump?: Client,
  ) {
    client.once("close", () => (this.ended = true));
  }

  /** False once the connection is gone (the node went away, or close() was called). */
  get open(): boolean {
    return !this.ended;
  }

  static async connect(target: SshTarget, opts: { readyTimeoutMs?: number } = {}): Promise<SshSession> {
    const readyTimeout = opts.readyTimeoutMs ?? 20_000;
    const common = { readyTimeout, keepaliveInterval: 5_000, keepaliveCountMax: 3 };
    const nodeCredentials = credentialsOf(target, `${target.user}@${target.host}`);
    const keys = [target.hostKey, ...(target.alsoAccept ?? [])].map((line) => ({ line, blob: publicKeyBlob(line) }));
    let accepted = target.hostKey;
    const verifyNode = (key: Buffer) => {
      const match = keys.find((k) => Buffer.compare(key, k.blob) === 0);
      if (match) accepted = match.line;
      return match !== undefined;
    };
    let jump: Client | undefined;
    let sock: ClientChannel | undefined;
    if (target.bastion) {
      const b = target.bastion;
      const name = `${b.user}@${b.host}:${b.port ?? 22}`;
      jump = await connectClient(
        { ...common, host: b.host, port: b.port ?? 22, username: b.user, ...credentialsOf(b, `bastion ${name}`) },
        pinned(b.hostKey),
        () => new HostKeyMismatchError(b.host, "bastion "),
      ).catch((e: Error) => {
        throw e instanceof HostKeyMismatchError ? e : new BastionError(name, e.message);
      });
      try {
        sock = await forwardThrough(jump, name, target.host, target.port ?? 22);
      } catch (e) {
        jump.end();
        throw e;
      }
    }
    try {
      const client = await connectClient(
        {
          ...common,
          ...(sock ? { sock } : { host: target.host, port: target.port ?? 22 }),
          username: target.user,
          ...nodeCredentials,
        },
        verifyNode,
        () => new HostKeyMismatchError(target.host),
      );
      return new SshSession(client, target, accepted, jump);
    } catch (e) {
      jump?.end();
      throw e;
    }
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
    this.jump?.end();
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
