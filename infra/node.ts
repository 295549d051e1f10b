// The contract every provider's control-plane node fulfils (lab, aws, azure, vsphere).
// The orchestrator and the bootstrap/teardown commands only ever see these shapes, so
// the same rollout runs unchanged on every provider.
import type { HostFileCarry } from "../orchestrator/core/model";
import type { NodeEntry } from "../orchestrator/core/nodes";
import type { ConnectionArgs } from "./remote/command";
import type { HostFilesFrom } from "./kubeadm/host-files-resource";
import type * as pulumi from "@pulumi/pulumi";
import type { SshAccessSettings } from "../orchestrator/core/nodes";

/**
 * Whether an update may create the node `name`, and so registers its join: the seed it
 * joins through, the node before it (one join at a time), the members' endpoints. The
 * orchestrator names the nodes its stored list does not hold yet (`joining`); absent, every
 * node may be new (a program run outside a rollout). A node that has joined registers none of
 * them: its join is history, and a link to another node would make every later removal of
 * that node re-register it (stack/targets.ts), a cost that grows with the list.
 */
export function joinsInThisUpdate(joining: readonly string[] | undefined, name: string): boolean {
  return joining === undefined || joining.includes(name);
}

export interface SshSettings {
  user: string;
  /** The ssh-agent and a bastion (molt:ssh.agent, molt:ssh.bastion). */
  access?: SshAccessSettings;
  /** OpenSSH private key used to reach nodes (secret). */
  privateKey: pulumi.Input<string>;
  /** Matching public key, installed on nodes as an authorized key. */
  publicKey: pulumi.Input<string>;
  port?: number;
}

/** A node's SSH host key, generated ahead of the machine and pinned by every client. */
export interface HostKeyPair {
  privateKey: pulumi.Input<string>;
  publicKey: pulumi.Input<string>;
}

/** What every provider's node exposes. */
export interface ControlPlaneNodeOutputs {
  privateAddress: pulumi.Output<string>;
  publicAddress?: pulumi.Output<string>;
  sshHost: pulumi.Output<string>;
  sshPort: pulumi.Output<number>;
  hostPublicKey: pulumi.Output<string>;
  providerId: pulumi.Output<string>;
}

/**
 * The host files a joining node gets (orchestrator/core/host-files.ts) with the connection of
 * the node the planner chose to copy them from; `built[i]` is `input.nodes[i]`'s component.
 */
export function hostFilesFor(
  input: { nodes: NodeEntry[]; hostFiles?: HostFileCarry },
  built: readonly { connection: pulumi.Output<ConnectionArgs> }[],
): { hostFiles?: HostFilesFrom } {
  const h = input.hostFiles;
  if (!h) return {};
  const i = input.nodes.findIndex((n) => n.name === h.from);
  if (i < 0 || i >= built.length)
    throw new Error(`internal: the host files' source ${h.from} is not a node listed before the joining one`);
  return { hostFiles: { from: built[i].connection, files: h.files } };
}
