// The real NodeAccess: one SSH session pool, the etcd edge and (opened when first needed)
// the Kubernetes edge over it.
import type { StoredState } from "../core/nodes";
import { EtcdAccess } from "./etcd";
import { KubeAccess } from "./kube";
import { SessionPool } from "./sessions";
import type { EtcdEdge, KubeEdge, NodeAccess, VipEdge } from "../core/edges";
import { SshVip } from "./vip";
import { accessFields } from "../../infra/remote/access";
import { type SshAccessSettings } from "../core/nodes";
import { sudoFor } from "./etcd";

export class SshNodeAccess implements NodeAccess {
  /** `access`: molt:ssh.agent and molt:ssh.bastion, besides the stack's key. */
  constructor(readonly access?: SshAccessSettings) {}

  private readonly pool = new SessionPool();
  private readonly etcdAccess = EtcdAccess.over(this.pool);
  private kubeAccess?: KubeAccess;

  get unreachable(): ReadonlyMap<string, string> {
    return this.etcdAccess.unreachable;
  }

  async sync(state: StoredState): Promise<void> {
    if (!state.sshPrivateKey && !this.access?.agent) throw new Error("the stack holds no SSH key for its nodes");
    await this.pool.sync(state.endpoints, this.credentials(state));
  }

  /** In flight: sessions and tunnels to nodes a change just made (warm). */
  private warming?: Promise<void>;

  warm(state: StoredState): void {
    if (!state.sshPrivateKey && !this.access?.agent) return;
    const before = this.warming ?? Promise.resolve();
    this.warming = before
      .then(() => this.pool.warm(state.endpoints, this.credentials(state)))
      .then((opened) => this.etcdAccess.warmTunnels(opened))
      .catch(() => undefined);
  }

  private credentials(state: StoredState) {
    return {
      user: state.sshUser,
      ...(state.sshPrivateKey ? { privateKey: state.sshPrivateKey } : {}),
      ...accessFields(this.access, state.sshPrivateKey),
    };
  }

  async run(node: string, command: string, what: string): Promise<string> {
    const ssh = this.pool.get(node);
    if (!ssh) throw new Error(`no SSH session to ${node}: ${this.unreachable.get(node) ?? "not a node of the stack"}`);
    return ssh.run(command.replace(/\bSUDO /g, sudoFor(ssh.target.user)), what);
  }

  async etcd(): Promise<EtcdEdge> {
    await this.etcdAccess.refresh();
    return this.etcdAccess;
  }

  async kube(): Promise<KubeEdge> {
    this.kubeAccess ??= await KubeAccess.open(this.pool);
    return this.kubeAccess;
  }

  async vip(): Promise<VipEdge> {
    return new SshVip((node) => this.pool.get(node));
  }

  async resetKube(): Promise<void> {
    await this.kubeAccess?.close();
    this.kubeAccess = undefined;
  }

  async close(): Promise<void> {
    // A session a warm-up opens after this is closed by the pool (its epoch moved on).
    await this.resetKube();
    await this.etcdAccess.close();
    this.pool.close();
  }
}
