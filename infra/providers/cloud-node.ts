// The tail every cloud control-plane node shares, whatever made its machine: the kubeadm
// bootstrap/teardown command (after the machine and its load-balancer attachment), the
// host key rotated over the first pinned connection, the connection joining nodes and
// molt use, and the outputs every provider exposes (infra/node.ts ControlPlaneNodeOutputs).
import * as pulumi from "@pulumi/pulumi";
import { kubeadmBootstrapCommand, type KubeadmBootstrapArgs } from "../kubeadm/bootstrap";
import type { ControlPlaneNodeOutputs } from "../node";
import type { ConnectionArgs, RemoteCommand } from "../remote/command";
import { connectionOf, type CloudControlPlaneNodeArgs } from "./cloud-common";

/** A cloud node's inputs without its provider's settings (the program's side). */
export type CloudNodeArgs = Omit<CloudControlPlaneNodeArgs<unknown>, "settings">;

/** What a provider's component made and hands to the shared tail. */
export interface CloudMachine {
  privateAddress: pulumi.Output<string>;
  publicAddress?: pulumi.Output<string>;
  /** Where molt's SSH reaches the node. */
  sshHost: pulumi.Output<string>;
  /** The form the provider's cloud controller gives Node.spec.providerID. */
  providerId: pulumi.Output<string>;
  /** The machine's own id: a replaced machine is bootstrapped again. */
  machineId: pulumi.Input<string>;
  /** What must exist before kubeadm runs (the machine; its load-balancer attachment). */
  dependsOn: pulumi.Resource[];
  /** How this provider's network needs the API endpoint reached (see KubeadmBootstrapArgs). */
  endpointRouting?: KubeadmBootstrapArgs["endpointRouting"];
}

export abstract class CloudControlPlaneNode extends pulumi.ComponentResource implements ControlPlaneNodeOutputs {
  declare readonly privateAddress: pulumi.Output<string>;
  declare readonly publicAddress?: pulumi.Output<string>;
  declare readonly sshHost: pulumi.Output<string>;
  declare readonly sshPort: pulumi.Output<number>;
  /** The host key molt pins from now on: the rotated one once the bootstrap has run. */
  declare readonly hostPublicKey: pulumi.Output<string>;
  declare readonly providerId: pulumi.Output<string>;
  /** kubeadm init/join on create (after rotating the host key), reset on delete. */
  declare readonly bootstrap: RemoteCommand;
  /** How molt (and a joining node's join material) reaches this node. */
  declare readonly connection: pulumi.Output<ConnectionArgs>;

  /** Adds the bootstrap command and the outputs; call last in the provider's constructor. */
  protected completeNode(args: CloudNodeArgs, m: CloudMachine): void {
    const { node } = args;
    const bootstrap = kubeadmBootstrapCommand(
      `${node.name}-kubeadm`,
      {
        node,
        ssh: args.ssh,
        hostKey: args.hostKey,
        // The first key travelled in user data, readable by more than the node: it opens
        // the first connection only (infra/remote/host-key-rotation.ts).
        rotateHostKey: true,
        settings: args.bootstrap,
        sshHost: m.sshHost,
        advertiseAddress: m.privateAddress,
        machineId: m.machineId,
        providerId: m.providerId,
        joinMaterial: args.joinMaterial,
        seed: args.seed,
        joinedAlready: args.joinedAlready,
        ...(args.hostFiles ? { hostFiles: args.hostFiles } : {}),
        ...(m.endpointRouting ? { endpointRouting: m.endpointRouting } : {}),
      },
      { parent: this, dependsOn: [...m.dependsOn, ...(args.after ? [args.after] : [])] },
    );
    // A node bootstrapped before molt rotated host keys keeps its first key (its command
    // never runs again, so it has no rotated key to report).
    const hostPublicKey = pulumi
      .all([bootstrap.hostKey, args.hostKey.publicKey])
      .apply(([pinned, first]) => pinned ?? first);
    const outputs = {
      privateAddress: m.privateAddress,
      sshHost: m.sshHost,
      sshPort: pulumi.output(args.ssh.port ?? 22),
      hostPublicKey,
      providerId: m.providerId,
    };
    Object.assign(this, {
      ...outputs,
      ...(m.publicAddress ? { publicAddress: m.publicAddress } : {}),
      bootstrap,
      connection: connectionOf(outputs, args),
    });
    this.registerOutputs(outputs);
  }
}
