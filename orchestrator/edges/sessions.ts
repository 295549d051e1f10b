// One pool of SSH sessions to the stack's nodes, shared by the etcd and Kubernetes edges
// (their tunnels ride on these sessions). Kept warm across passes: a pass reconnects only
// nodes that are new, were unreachable, or whose connection dropped.
import type { NodeEndpoint } from "../../infra/node";
import { SshSession, type BastionTarget } from "../../infra/remote/ssh";

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

export class SessionPool {
  private readonly sessions = new Map<string, SshSession>();
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

  /** Connected nodes. */
  nodes(): string[] {
    return [...this.sessions.keys()];
  }

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
            const session = await SshSession.connect(
              { ...ssh, host: e.sshHost, port: e.sshPort, user: e.sshUser ?? ssh.user, hostKey: e.hostPublicKey },
              { readyTimeoutMs: CONNECT_TIMEOUT_MS },
            );
            this.sessions.set(e.name, session);
          } catch (err) {
            this.failures.set(e.name, (err as Error).message);
          }
        }),
    );
  }

  private drop(node: string): void {
    this.sessions.get(node)?.close();
    this.sessions.delete(node);
    for (const l of this.dropListeners) l(node);
  }

  private closeAll(): void {
    for (const node of [...this.sessions.keys()]) this.drop(node);
  }

  close(): void {
    this.closeAll();
    this.failures.clear();
  }
}
