// The one SSH edge of molt: every connection pins the node's host key, and the bastion's
// when it goes through one. There is no code path that accepts an unknown key, so a node
// (or bastion) that answers with another key is refused.
import { Client, type ClientChannel, type ConnectConfig } from "ssh2";
import { createServer, type AddressInfo, type Server } from "node:net";
import { createWriteStream } from "node:fs";
import { envPrefix } from "./shell";
import { publicKeyBlob, publicKeyLine } from "./ssh-keys";

export {
  fingerprintOf,
  fingerprintOfBlob,
  generateSshKeyPair,
  publicKeyBlob,
  publicKeyLine,
  sshKeyPairFromSeed,
} from "./ssh-keys";
export { envPrefix, shellQuote } from "./shell";

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

/**
 * The bastion is fine, but could not connect to the host behind it (the host's SSH port
 * refused, no route, a timeout): the host's problem, said for each host, not the bastion's.
 */
export class UnreachableThroughBastionError extends Error {
  constructor(
    readonly bastion: string,
    readonly host: string,
    readonly port: number,
    detail: string,
  ) {
    super(`bastion ${bastion} could not connect to ${host}:${port} (${detail})`);
    this.name = "UnreachableThroughBastionError";
  }
}

/** SSH_MSG_CHANNEL_OPEN_FAILURE's reason when the server could not make the connection (RFC 4254 5.1). */
const OPEN_CONNECT_FAILED = 2;

/** What a refused direct-tcpip channel means: the host behind the bastion, or the bastion itself. */
export function forwardError(bastion: string, host: string, port: number, err: Error & { reason?: unknown }): Error {
  const detail = err.message.replace(/^\(SSH\) Channel open failure: /, "");
  return err.reason === OPEN_CONNECT_FAILED
    ? new UnreachableThroughBastionError(bastion, host, port, detail)
    : new BastionError(bastion, `refused to open a connection to ${host}:${port} (${err.message})`);
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

/**
 * Connects one ssh2 client; resolves once authenticated. `hostVerifier` sees the raw host
 * key and decides; a refusal by it rejects with what `refused()` makes.
 */
/** The other end closed the connection before the SSH login completed. */
export class SshHandshakeClosedError extends Error {
  constructor(where: string) {
    super(`the connection to ${where} was closed during the SSH handshake (its sshd stopped, or it is going down)`);
    this.name = "SshHandshakeClosedError";
  }
}

function connectClient(
  config: ConnectConfig,
  hostVerifier: (key: Buffer) => boolean,
  refused: () => Error,
  /** host:port, for the errors. */
  where: string,
): Promise<Client> {
  const client = new Client();
  let mismatch = false;
  return new Promise<Client>((resolve, reject) => {
    const onError = (err: Error) => {
      client.removeListener("ready", onReady);
      client.removeListener("close", onClose);
      client.removeListener("end", onClose);
      // A connect can fail twice: a machine that accepts TCP but never speaks SSH times out,
      // then reports the connection lost as it closes. Unheard, that second error ended the
      // whole process (found on the lab: a machine left half-made by a killed run).
      client.on("error", () => undefined);
      client.end();
      reject(mismatch ? refused() : err);
    };
    // The other end closes the connection after its banner, in the key exchange or the login
    // (an sshd killed with its machine, a node rebooting): ssh2 emits neither "ready" nor
    // "error" then, and clears its ready timeout as the socket closes, so without this the
    // connect never settled. Found by the chaos CI subset, whose cluster watcher hung in one
    // (docs/reliability.md); a molt pass connecting to such a node would have hung the same way.
    const onClose = () => {
      client.removeListener("ready", onReady);
      client.removeListener("error", onError);
      client.removeListener("close", onClose);
      client.removeListener("end", onClose);
      client.on("error", () => undefined);
      reject(mismatch ? refused() : new SshHandshakeClosedError(where));
    };
    const onReady = () => {
      client.removeListener("error", onError);
      client.removeListener("close", onClose);
      client.removeListener("end", onClose);
      client.on("error", () => {
        /* later errors surface on the calls that hit them */
      });
      resolve(client);
    };
    client.once("ready", onReady);
    client.once("error", onError);
    // Through a bastion the connection is a channel that may stay half open: the other end's
    // close arrives as "end" alone (OpenSSH closes the channel only once this side has too).
    client.once("close", onClose);
    client.once("end", onClose);
    client.connect({
      ...config,
      hostVerifier: (key: Buffer) => {
        const ok = hostVerifier(key);
        if (!ok) mismatch = true;
        return ok;
      },
    });
    // Without TCP_NODELAY every request through the connection (an etcd or API call through a
    // tunnel, a command's stdin) that the peer answers after two writes waits for a delayed
    // ACK (tens of ms, many times the call itself). A channel through a bastion has no socket
    // of its own: the bastion's client carries it.
    client.setNoDelay(true);
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
        err ? reject(forwardError(bastion, host, port, err)) : resolve(channel),
      );
    } catch (e) {
      reject(new BastionError(bastion, `connection lost (${(e as Error).message})`));
    }
  });
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
      {
        readyTimeout: timeout,
        // A bastion that goes silent once logged in is given up, not waited on for TCP's 15 min.
        keepaliveInterval: 5_000,
        keepaliveCountMax: 3,
        host: b.host,
        port: b.port ?? 22,
        username: b.user,
        ...credentialsOf(b, name),
      },
      pinned(b.hostKey),
      () => new HostKeyMismatchError(b.host, "bastion "),
      `${b.host}:${b.port ?? 22}`,
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
      `${host}:${port}`,
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
    /** The channel through the bastion that carries this connection. */
    channel?: ClientChannel,
  ) {
    client.once("close", () => (this.ended = true));
    // The node closed its side. Through a bastion the connection is a channel, which stays
    // half open (OpenSSH closes it only once this side has), with the commands under way
    // waiting on it; ssh2's own end() does nothing on a half-closed stream. Closing the
    // channel ends the connection, and ssh2 then ends every channel on it. (Directly, the
    // socket closes by itself.)
    client.once("end", () => {
      this.ended = true;
      channel?.destroy();
    });
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
        `${b.host}:${b.port ?? 22}`,
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
        `${target.host}:${target.port ?? 22}${sock ? " (through the bastion)" : ""}`,
      );
      return new SshSession(client, target, accepted, jump, sock);
    } catch (e) {
      jump?.end();
      throw e;
    }
  }

  /** Set once this connection has started a session (any exec, or startSession). */
  private sessionStarted = false;

  /**
   * Starts a session on this connection, once, without waiting for it. OpenSSH's sshd turns
   * TCP_NODELAY on for its end of a connection only when the connection starts a session
   * (packet.c ssh_packet_set_interactive, on an exec or a shell): on one that only forwards
   * ports, a reply sshd writes in two packets waits for this end's delayed ACK (tens of ms
   * per call through a tunnel, many times the call itself).
   * Callers start it once the reads that matter are done: an exec costs sshd a login.
   */
  startSession(): void {
    if (this.sessionStarted) return;
    this.exec("true", { signal: AbortSignal.timeout(5_000) }).catch(() => undefined);
  }

  /** Runs a command; resolves with its output whatever the exit code. */
  exec(command: string, opts: ExecOptions = {}): Promise<ExecResult> {
    this.sessionStarted = true;
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
    this.sessionStarted = true;
    return new Promise((resolve, reject) => {
      const onExec = (err: Error | undefined, stream: ClientChannel) => {
        if (err) return reject(err);
        const out = createWriteStream(path, { mode: 0o600 });
        let bytes = 0;
        let stderr = "";
        stream.on("data", (d: Buffer) => (bytes += d.length));
        stream.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
        stream.pipe(out);
        // Whole only once the file is written and closed and the command said it exited 0: an
        // exit status may come after the output's end, and a channel cut off (the connection
        // lost) ends the output with none, which is not a whole copy.
        let code: number | null = null;
        let finished = false;
        let closed = false;
        let settled = false;
        const settle = (e?: Error) => {
          if (settled) return;
          if (e) {
            settled = true;
            out.destroy();
            return reject(e);
          }
          if (!finished || !closed) return;
          settled = true;
          if (code === 0) resolve(bytes);
          else reject(new RemoteCommandError(this.target.host, what, code, stderr || "no exit status"));
        };
        stream.on("exit", (c: number | null) => (code = c));
        out.on("close", () => ((finished = true), settle()));
        out.on("error", (e: Error) => {
          stream.close();
          settle(e);
        });
        stream.on("close", (c: number | null) => {
          if (code === null && typeof c === "number") code = c;
          closed = true;
          // The command's output never reached its end (the channel was cut): the file is not whole.
          if (!finished && !out.writableEnded) out.end();
          settle();
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
    // The local hop too: a reply the tunnel hands back in pieces is not held for an ACK.
    const server: Server = createServer({ noDelay: true }, (sock) => {
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
