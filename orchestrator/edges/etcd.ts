// molt's etcd edge. etcd is reached only through SSH tunnels to each node's loopback
// client port, with mutual TLS (the node's healthcheck-client certificate, read over
// SSH and held in memory only). One client per endpoint for per-member calls (status,
// moveLeader); membership calls go to voters only (learners reject them) and are made
// idempotent, because the etcd3 client retries them on another host.
import type { Alarm, EndpointStatus, Member } from "../core/observations";
import { Etcd3, type IMember, type IStatusResponse } from "etcd3";
import type { NodeEndpoint } from "../core/nodes";
import type { SshSession } from "../../infra/remote/ssh";
import { SessionPool, type SshCredentials } from "./sessions";
import { etcdLeaseKv } from "../lease/cluster";
import { type EtcdEdge, type LeaseKv } from "../core/edges";
import { etcdOwnerCalls } from "./etcd-owner";
import { readEtcdVersion } from "./etcd-version";
import { renameSync, rmSync } from "node:fs";
import { saveSnapshotStream, type SnapshotStream } from "./snapshot-stream";

const CALL_DEADLINE_MS = 5_000;
const PKI = "/etc/kubernetes/pki/etcd";

/** kubeadm's PKI is root-only; cloud images log in as a sudo-capable user. */
export function sudoFor(user: string): string {
  return user === "root" ? "" : "sudo -n ";
}

/** etcdctl on the node itself, as the healthcheck client, against its local member. */
function etcdctlOnNode(user: string, args: string): string {
  return (
    `${sudoFor(user)}env ETCDCTL_API=3 /usr/local/bin/etcdctl --endpoints=https://127.0.0.1:2379 ` +
    `--cacert=${PKI}/ca.crt --cert=${PKI}/healthcheck-client.crt --key=${PKI}/healthcheck-client.key ${args}`
  );
}

interface Tunnel {
  port: number;
  close: () => Promise<void>;
  client?: Etcd3;
}

export class EtcdUnreachableError extends Error {
  constructor(detail: string) {
    super(`etcd is not reachable through any node: ${detail}`);
    this.name = "EtcdUnreachableError";
  }
}

export function toMember(m: IMember): Member {
  return { id: m.ID, name: m.name, peerURLs: m.peerURLs, clientURLs: m.clientURLs, isLearner: !!m.isLearner };
}

export function toStatus(s: IStatusResponse): EndpointStatus {
  return {
    memberId: s.header.member_id,
    leader: s.leader,
    raftIndex: BigInt(s.raftIndex),
    raftAppliedIndex: BigInt(s.raftAppliedIndex ?? "0"),
    raftTerm: BigInt(s.raftTerm),
    dbSize: Number(s.dbSize),
    isLearner: !!s.isLearner,
    version: s.version,
    errors: s.errors ?? [],
  };
}

/** PEM material of a TLS client (the etcd healthcheck client, the Kubernetes admin). */
export interface TlsClientCredentials {
  ca: string;
  cert: string;
  key: string;
}

export class EtcdAccess implements EtcdEdge {
  private readonly tunnels = new Map<string, Tunnel>();
  private readonly tunnelFailures = new Map<string, string>();
  private readonly clients = new Set<Etcd3>();
  private credentials?: TlsClientCredentials;

  private constructor(
    private readonly pool: SessionPool,
    private readonly ownsPool: boolean,
  ) {
    pool.onDrop((node) => void this.dropTunnel(node));
  }

  /** The etcd edge over a session pool the caller owns (the rollout loop's). */
  static over(pool: SessionPool): EtcdAccess {
    return new EtcdAccess(pool, false);
  }

  /**
   * Opens its own sessions to the nodes (tools and tests); unreachable nodes are recorded,
   * not fatal. Fails when no node yields the etcd client certificate.
   */
  static async open(nodes: NodeEndpoint[], ssh: SshCredentials): Promise<EtcdAccess> {
    const pool = new SessionPool();
    const access = new EtcdAccess(pool, true);
    try {
      await pool.sync(nodes, ssh);
      await access.refresh();
      return access;
    } catch (e) {
      await access.close();
      throw e;
    }
  }

  /**
   * Opens tunnels to the pool's nodes that have none (and drops tunnels of nodes it no
   * longer holds), then reads the client certificate once, from the first node that has it.
   */
  async refresh(): Promise<void> {
    const nodes = this.pool.nodes();
    this.tunnelFailures.clear();
    await Promise.all(
      nodes
        .filter((n) => !this.tunnels.has(n))
        .map(async (n) => {
          try {
            await this.openTunnel(n);
          } catch (e) {
            this.tunnelFailures.set(n, (e as Error).message);
          }
        }),
    );
    if (this.credentials) {
      this.startSessions();
      return;
    }
    // In the pool's order (the stack's, or the hosts as given to adopt), not the order the
    // tunnels happened to open in: which node's CA is trusted must not be a race.
    for (const n of nodes.filter((x) => this.tunnels.has(x))) {
      const ssh = this.pool.get(n)!;
      const cat = `${sudoFor(ssh.target.user)}cat`;
      const r = await ssh.exec(
        `${cat} ${PKI}/ca.crt; echo '--molt--'; ${cat} ${PKI}/healthcheck-client.crt; echo '--molt--'; ` +
          `${cat} ${PKI}/healthcheck-client.key`,
      );
      const parts = r.stdout.split("--molt--\n");
      if (r.code === 0 && parts.length === 3) {
        this.credentials = { ca: parts[0], cert: parts[1], key: parts[2] };
        this.startSessions();
        return;
      }
    }
    const why = [...this.unreachable.entries()].map(([n, r]) => `${n}: ${r}`).join("; ");
    throw new EtcdUnreachableError(why || (nodes.length ? "no node has etcd client certificates" : "no nodes"));
  }

  /** Every tunnel's connection starts a session (SshSession.startSession: prompt replies from sshd). */
  private startSessions(): void {
    for (const n of this.tunnels.keys()) this.pool.get(n)?.startSession();
  }

  /** Tunnels being opened, by node: a warm-up and a refresh never open two for one node. */
  private readonly opening = new Map<string, Promise<void>>();

  private openTunnel(node: string): Promise<void> {
    const pending = this.opening.get(node);
    if (pending) return pending;
    const session = this.pool.get(node);
    if (!session) return Promise.reject(new EtcdUnreachableError(`no session to ${node}`));
    const p = session.forward("127.0.0.1", 2379).then(
      (fwd) => {
        this.opening.delete(node);
        // Its session was dropped (or replaced) meanwhile: that tunnel leads nowhere.
        if (this.pool.get(node) !== session || this.tunnels.has(node)) return void fwd.close();
        this.tunnels.set(node, { port: fwd.port, close: fwd.close });
      },
      (e: unknown) => {
        this.opening.delete(node);
        throw e;
      },
    );
    this.opening.set(node, p);
    return p;
  }

  /**
   * Opens tunnels to these nodes in the background where their sessions are up (a node the
   * engine just created, warmed by the pool): no certificate is read and nothing is recorded.
   */
  warmTunnels(nodes: string[]): Promise<void> {
    return Promise.all(
      nodes
        .filter((n) => !this.tunnels.has(n) && this.pool.get(n))
        .map((n) =>
          this.openTunnel(n).then(
            () => this.pool.get(n)?.startSession(),
            () => {},
          ),
        ),
    ).then(() => undefined);
  }

  /** The sessions the tunnels ride on (the Kubernetes edge can share them). */
  get sessions(): SessionPool {
    return this.pool;
  }

  /** Nodes without a working tunnel, with the reason. */
  get unreachable(): ReadonlyMap<string, string> {
    return new Map([...this.pool.unreachable, ...this.tunnelFailures]);
  }

  nodes(): string[] {
    return [...this.tunnels.keys()];
  }

  private async dropTunnel(node: string): Promise<void> {
    const t = this.tunnels.get(node);
    if (!t) return;
    this.tunnels.delete(node);
    if (t.client) {
      t.client.close();
      this.clients.delete(t.client);
    }
    await t.close();
  }

  private makeClient(ports: number[]): Etcd3 {
    const credentials = this.credentials;
    if (!credentials) throw new EtcdUnreachableError("the etcd client certificate was not read yet");
    const client = new Etcd3({
      hosts: ports.map((p) => `https://127.0.0.1:${p}`),
      credentials: {
        rootCertificate: Buffer.from(credentials.ca),
        certChain: Buffer.from(credentials.cert),
        privateKey: Buffer.from(credentials.key),
      },
      // The tunnel ends at 127.0.0.1; members' certificates carry DNS:localhost, and an
      // IP as TLS server name is not allowed (RFC 6066).
      grpcOptions: { "grpc.ssl_target_name_override": "localhost", "grpc.default_authority": "localhost" },
      // dialTimeout is ignored by etcd3; a per-call deadline bounds every call.
      defaultCallOptions: (ctx) => (ctx.isStream ? {} : { deadline: Date.now() + CALL_DEADLINE_MS }),
    });
    this.clients.add(client);
    return client;
  }

  /** A client bound to one node's member only (status, moveLeader, alarms of that member). */
  endpoint(node: string): Etcd3 {
    const t = this.tunnels.get(node);
    if (!t) throw new EtcdUnreachableError(`no tunnel to ${node}: ${this.unreachable.get(node) ?? "not a known node"}`);
    t.client ??= this.makeClient([t.port]);
    return t.client;
  }

  /** A client over the given voters (never learners: they reject most RPCs). */
  voters(nodes: string[]): Etcd3 {
    const ports = nodes.map((n) => this.tunnels.get(n)?.port).filter((p): p is number => p !== undefined);
    if (ports.length === 0) throw new EtcdUnreachableError(`none of ${nodes.join(", ")} is reachable`);
    return this.makeClient(ports);
  }

  async status(node: string): Promise<EndpointStatus> {
    return toStatus(await this.endpoint(node).maintenance.status());
  }

  /** etcd's cluster version as `node`'s member reports it: /version over its tunnel, with mutual TLS. */
  async clusterVersion(node: string): Promise<string> {
    const t = this.tunnels.get(node);
    if (!t) throw new EtcdUnreachableError(`no tunnel to ${node}: ${this.unreachable.get(node) ?? "not a known node"}`);
    if (!this.credentials) throw new EtcdUnreachableError("the etcd client certificate was not read yet");
    // The members' certificates carry DNS:localhost (see makeClient).
    const v = await readEtcdVersion(`https://127.0.0.1:${t.port}`, { ...this.credentials, servername: "localhost" });
    return v.cluster;
  }

  async memberList(via: string): Promise<Member[]> {
    const r = await this.endpoint(via).cluster.memberList({ linearizable: true } as never);
    return r.members.map(toMember);
  }

  async alarms(via: string): Promise<Alarm[]> {
    const r = await this.endpoint(via).maintenance.alarm({ action: "Get", memberID: "0", alarm: "None" } as never);
    // etcd3 names the enum "Nospace"/"Corrupt"; etcd and its docs say NOSPACE/CORRUPT.
    return (r.alarms ?? []).map((a) => ({ memberId: a.memberID, alarm: String(a.alarm).toUpperCase() }));
  }

  /** Removes a member; "member not found" (a retried call that already landed) counts as done. */
  async memberRemove(via: string, id: string): Promise<void> {
    try {
      await this.endpoint(via).cluster.memberRemove({ ID: id });
    } catch (e) {
      if (/member not found/i.test((e as Error).message)) return;
      throw e;
    }
  }

  /** Promotes a learner; "not a learner" (already promoted) counts as done. */
  async promoteLearner(via: string, id: string): Promise<void> {
    try {
      await this.endpoint(via).cluster.memberPromote({ ID: id });
    } catch (e) {
      if (/not a learner/i.test((e as Error).message)) return;
      throw e;
    }
  }

  /** Moves leadership; must be sent to the current leader's endpoint. */
  async moveLeader(leaderNode: string, targetId: string): Promise<void> {
    await this.endpoint(leaderNode).maintenance.moveLeader({ targetID: targetId });
  }

  /**
   * hashKV of one member at a revision (consistency checks). The etcd3 client's gRPC
   * service lacks HashKV, so this asks the member's own etcdctl over SSH.
   */
  async hashKV(node: string, revision: string): Promise<{ hash: string; compactRevision: string }> {
    const ssh = this.session(node);
    if (!ssh) throw new EtcdUnreachableError(`no session to ${node}`);
    if (!/^\d+$/.test(revision)) throw new Error(`invalid revision ${revision}`);
    // Hashing a large keyspace takes longer than etcdctl's default 5 s command timeout.
    const out = await ssh.run(
      etcdctlOnNode(ssh.target.user, `--command-timeout=300s endpoint hashkv --rev=${revision} -w json`),
      `hashKV on ${node}`,
    );
    const parsed = JSON.parse(out) as { HashKV: { hash: number; compact_revision: number } }[];
    return { hash: String(parsed[0].HashKV.hash), compactRevision: String(parsed[0].HashKV.compact_revision ?? 0) };
  }

  /**
   * Saves a snapshot of one member's database to a local file: `etcdctl snapshot save` on
   * the node (etcd streams it locally, fast), then the file comes over SSH with flow
   * control, then the node's copy is removed.
   */
  async snapshot(node: string, path: string): Promise<number> {
    const ssh = this.session(node);
    if (!ssh) throw new EtcdUnreachableError(`no session to ${node}`);
    const sudo = sudoFor(ssh.target.user);
    const remote = `/var/lib/etcd-molt-snapshot-${process.pid}.db`;
    // kubeadm nodes run etcd as a static pod and may have no etcdctl: stream over gRPC there.
    if ((await ssh.exec("test -x /usr/local/bin/etcdctl")).code !== 0) return this.snapshotOverGrpc(node, path);
    try {
      await ssh.run(
        `${etcdctlOnNode(ssh.target.user, `snapshot save ${remote}`)} >/dev/null`,
        `etcd snapshot on ${node}`,
      );
      // As over gRPC (edges/snapshot-stream.ts): whole under its name, or not there at all.
      const part = `${path}.part`;
      try {
        const bytes = await ssh.execToFile(`${sudo}cat ${remote}`, part, `copying the snapshot from ${node}`);
        renameSync(part, path);
        return bytes;
      } catch (e) {
        rmSync(part, { force: true });
        throw e;
      }
    } finally {
      await ssh.exec(`${sudo}rm -f ${remote}`).catch(() => undefined);
    }
  }

  private async snapshotOverGrpc(node: string, path: string): Promise<number> {
    const stream = await this.endpoint(node).maintenance.snapshot();
    return saveSnapshotStream(stream as unknown as SnapshotStream, path, { what: `etcd snapshot of ${node}` });
  }

  /**
   * The cluster lease's calls (orchestrator/lease/cluster.ts), to each member with a tunnel in
   * turn: the tunnels follow the node list, so the lease outlives the nodes it was taken through.
   */
  leaseKv(): LeaseKv {
    return etcdLeaseKv("the cluster's etcd", () => this.memberClients());
  }

  /** The cluster's ownership marker (core/ownership.ts), through whichever member answers. */
  private readonly owner = etcdOwnerCalls(() => this.memberClients());

  readOwner(): ReturnType<EtcdEdge["readOwner"]> {
    return this.owner.readOwner();
  }

  writeOwner(value: string, ifRevision?: string): ReturnType<EtcdEdge["writeOwner"]> {
    return this.owner.writeOwner(value, ifRevision);
  }

  removeOwner(revision: string): Promise<boolean> {
    return this.owner.removeOwner(revision);
  }

  /** A client per member with a tunnel: the tunnels follow the node list. */
  private memberClients(): Etcd3[] {
    return this.nodes()
      .map((n) => {
        try {
          return this.endpoint(n);
        } catch {
          return undefined;
        }
      })
      .filter((c): c is Etcd3 => c !== undefined);
  }

  /** The SSH session to a node (for commands such as a reset). */
  session(node: string): SshSession | undefined {
    return this.pool.get(node);
  }

  async close(): Promise<void> {
    for (const c of this.clients) c.close();
    this.clients.clear();
    await Promise.all([...this.tunnels.keys()].map((n) => this.dropTunnel(n)));
    if (this.ownsPool) this.pool.close();
  }
}
