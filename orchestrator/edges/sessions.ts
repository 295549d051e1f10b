// One pool of SSH sessions to the stack's nodes, shared by the etcd and Kubernetes edges
// (their tunnels ride on these sessions). Kept warm across passes: a pass reconnects only
// nodes that are new, were unreachable, or whose connection dropped.
import type { NodeEndpoint } from "../core/nodes";
import { SshSession, type BastionTarget, type SshTarget } from "../../infra/remote/ssh";

export interface SshCredentials {
  /** The default login user; an endpoint may name its own (an adopted node's). */
  user: string;
  /** OpenSSH private key (secret; from the stack state, never from a command line). */
  privateKey?: string;
  /** Also the ssh-agent (molt:ssh.agent): its socket, or true for $SSH_AUTH_SOCK. */
  agent?: true | string;
  /** Every session goes through this jump host (molt:ssh.bastion). */
  bastion?: BastionTarget;
}

const CONNECT_TIMEOUT_MS = 10_000;

/** How a session is opened (SshSession.connect; unit tests pass a fake). */
export type Connect = (target: SshTarget, opts: { readyTimeoutMs?: number }) => Promise<SshSession>;

export class SessionPool {
  constructor(private readonly connect: Connect = (t, o) => SshSession.connect(t, o)) {}

  private readonly sessions = new Map<string, SshSession>();
  /** Connects `warm` started that have not settled yet, by node. */
  private readonly warming = new Map<string, Promise<SshSession | undefined>>();
  /** Bumped whenever every session is closed: a warm-up that lands after it closes its session. */
  private epoch = 0;
  private readonly failures = new Map<string, string>();
  private readonly dropListeners: ((node: string) => void)[] = [];
  private key = "";

  /** Nodes whose session could not be opened in the last sync, with the reason. */
  get unreachable(): ReadonlyMap<string, string> {
    return this.failures;
  }

  /** Called when a node's session is closed (it left the list, or its connection dropped). */
  onDrop(listener: (node: string) => void): void {
    this.dropListeners.push(listener);
  }

  /**
   * Connected nodes, in the order the last sync was given them (the stack's order, or the hosts
   * as given to adopt), never the order their connections happened to complete in: callers pick
   * "the first node" (whose etcd CA to trust), which must not be a race. Nodes only a warm-up
   * connected come last.
   */
  nodes(): string[] {
    const listed = this.order.filter((n) => this.sessions.has(n));
    return [...listed, ...[...this.sessions.keys()].filter((n) => !this.order.includes(n))];
  }

  /** The nodes of the last sync, in its order. */
  private order: string[] = [];

  get(node: string): SshSession | undefined {
    return this.sessions.get(node);
  }

  /**
   * Makes the pool hold sessions to exactly these nodes: opens the missing ones in
   * parallel, closes the ones no longer listed, keeps the rest. A node that cannot be
   * reached is recorded in `unreachable`, not fatal.
   */
  async sync(endpoints: NodeEndpoint[], ssh: SshCredentials): Promise<void> {
    // Another key or user (a rotated key) invalidates every session.
    const key = JSON.stringify([ssh.user, ssh.privateKey, ssh.agent, ssh.bastion]);
    if (key !== this.key) {
      this.closeAll();
      this.key = key;
    }
    const wanted = new Map(endpoints.map((e) => [e.name, e]));
    this.order = endpoints.map((e) => e.name);
    for (const [node, session] of this.sessions) {
      const e = wanted.get(node);
      if (!e || !session.open || session.target.hostKey !== e.hostPublicKey || session.target.host !== e.sshHost)
        this.drop(node);
    }
    this.failures.clear();
    await Promise.all(
      endpoints
        .filter((e) => !this.sessions.has(e.name))
        .map(async (e) => {
          try {
            const own = this.open(e, ssh);
            // A warm-up still in flight may hang on a machine that was not up yet: the first of
            // it and a fresh connect wins, and the other is closed when it lands.
            const pending = this.warming.get(e.name);
            const session = pending
              ? await Promise.any([pending.then((s) => s ?? Promise.reject(new Error("warm-up failed"))), own])
              : await own;
            if (this.sessions.get(e.name) !== session) this.sessions.get(e.name)?.close();
            this.sessions.set(e.name, session);
            if (pending)
              void own.then(
                (s) => s !== session && s.close(),
                () => undefined,
              );
          } catch (err) {
            const errors = err instanceof AggregateError ? err.errors : [err];
            this.failures.set(e.name, (errors[errors.length - 1] as Error).message);
          }
        }),
    );
  }

  /**
   * Opens sessions to the endpoints the pool has none to, in the background, and closes or
   * forgets none: a node the engine just created is reachable before the next observation
   * needs it. A failure is not recorded (the next sync connects again and records it).
   * Resolves with the nodes it connected.
   */
  warm(endpoints: NodeEndpoint[], ssh: SshCredentials): Promise<string[]> {
    const key = JSON.stringify([ssh.user, ssh.privateKey, ssh.agent, ssh.bastion]);
    if (key !== this.key) return Promise.resolve([]);
    const epoch = this.epoch;
    const started = endpoints
      .filter((e) => !this.sessions.has(e.name) && !this.warming.has(e.name))
      .map((e) => {
        const p = this.open(e, ssh).then(
          (s) => {
            if (this.warming.get(e.name) === p) this.warming.delete(e.name);
            // Closed, or another key, or a sync connected it first, since it started: not kept.
            if (epoch !== this.epoch || this.sessions.has(e.name)) {
              if (this.sessions.get(e.name) !== s) s.close();
              return s;
            }
            this.sessions.set(e.name, s);
            return s;
          },
          () => {
            if (this.warming.get(e.name) === p) this.warming.delete(e.name);
            return undefined;
          },
        );
        this.warming.set(e.name, p);
        return p.then((s) => (s && this.sessions.get(e.name) === s ? e.name : undefined));
      });
    return Promise.all(started).then((names) => names.filter((n): n is string => n !== undefined));
  }

  private open(e: NodeEndpoint, ssh: SshCredentials): Promise<SshSession> {
    return this.connect(
      { ...ssh, host: e.sshHost, port: e.sshPort, user: e.sshUser ?? ssh.user, hostKey: e.hostPublicKey },
      { readyTimeoutMs: CONNECT_TIMEOUT_MS },
    );
  }

  private drop(node: string): void {
    this.sessions.get(node)?.close();
    this.sessions.delete(node);
    for (const l of this.dropListeners) l(node);
  }

  private closeAll(): void {
    this.epoch++;
    this.warming.clear();
    for (const node of [...this.sessions.keys()]) this.drop(node);
  }

  close(): void {
    this.closeAll();
    this.failures.clear();
  }
}
