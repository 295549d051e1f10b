// A command run on a node over SSH as a Pulumi resource: `create` runs once when the
// resource is created, `delete` when it is destroyed. Nodes are immutable, so a changed
// script text (a newer molt) never re-runs anything on an existing node; only a change
// of `triggers` replaces the resource.
//
// Why not @pulumi/command's remote.Command: its provider plugin cannot be built on
// machines that only reach package registries (the Go proxy refuses the module), and
// a dynamic provider needs no plugin at all on users' machines. Like remote.Command with
// connection.hostKey, every connection pins the node's host key.
import * as pulumi from "@pulumi/pulumi";
import { implementation } from "../dynamic";
import type { BastionTarget, SshTarget } from "./ssh";

export interface ConnectionArgs {
  host: pulumi.Input<string>;
  port?: pulumi.Input<number>;
  user: pulumi.Input<string>;
  privateKey?: pulumi.Input<string>;
  /** Also offer the keys of the ssh-agent at $SSH_AUTH_SOCK (read when the command runs). */
  agent?: pulumi.Input<true>;
  hostKey: pulumi.Input<string>;
  /** Every connection goes through this jump host (molt:ssh.bastion). */
  bastion?: pulumi.Input<BastionTarget>;
}

export interface RemoteCommandArgs {
  connection: pulumi.Input<ConnectionArgs>;
  /** bash script run on create; must be idempotent. */
  create: pulumi.Input<string>;
  /** bash script run on delete; must be idempotent. */
  delete?: pulumi.Input<string>;
  /** Non-secret environment for both scripts (visible in the node's process list). */
  environment?: pulumi.Input<Record<string, pulumi.Input<string>>>;
  /** Secret material for the create script, fed on its stdin (never on a command line). */
  stdin?: pulumi.Input<string>;
  /** Any change replaces the resource (runs delete, then create). */
  triggers?: pulumi.Input<unknown[]>;
  /**
   * Rotate the node's host key over the first (pinned) connection before `create` runs
   * (infra/remote/host-key-rotation.ts); the stored connection then pins the new key.
   */
  rotateHostKey?: pulumi.Input<boolean>;
}

export interface RemoteCommandInputs {
  connection: SshTarget;
  create: string;
  delete?: string;
  environment?: Record<string, string>;
  stdin?: string;
  triggers?: unknown[];
  rotateHostKey?: boolean;
}

export interface RemoteCommandOutputs {
  /** The host key the node offers since `create` (absent on commands made before molt rotated keys). */
  hostKey?: string;
  stdout: string;
  stderr: string;
  /** How long the create script ran. */
  createMs: number;
}

const provider: pulumi.dynamic.ResourceProvider = {
  async create(inputs: RemoteCommandInputs) {
    return implementation("infra/remote/command-impl").create(inputs);
  },
  async diff(_id: string, olds: RemoteCommandInputs, news: RemoteCommandInputs) {
    return implementation("infra/remote/command-impl").diff(olds, news);
  },
  async delete(_id: string, props: RemoteCommandInputs & RemoteCommandOutputs) {
    await implementation("infra/remote/command-impl").remove(props);
  },
};

export class RemoteCommand extends pulumi.dynamic.Resource {
  declare readonly stdout: pulumi.Output<string>;
  declare readonly stderr: pulumi.Output<string>;
  declare readonly createMs: pulumi.Output<number>;
  /** The host key to pin since `create`; undefined for a command created before molt rotated host keys. */
  declare readonly hostKey: pulumi.Output<string | undefined>;

  constructor(name: string, args: RemoteCommandArgs, opts?: pulumi.CustomResourceOptions) {
    // The connection (private key) and stdin are kept in the outputs because delete needs
    // them; they stay encrypted in the state.
    const secrets = { additionalSecretOutputs: ["connection", "stdin"] };
    super(
      provider,
      name,
      { ...args, stdout: undefined, stderr: undefined, createMs: undefined, hostKey: undefined },
      pulumi.mergeOptions(opts, secrets),
      "molt",
      "RemoteCommand",
    );
  }
}
