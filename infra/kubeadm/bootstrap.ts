// The bootstrap/teardown RemoteCommand every cloud node gets: create = kubeadm init (the
// first node of a new cluster) or kubeadm join --control-plane; delete = kubeadm reset, which
// molt's prune skips (a retired machine is destroyed without it, infra/remote/teardown.ts).
// It is replaced (reset, then bootstrap again) only when the machine itself is replaced
// or the node's image or version changes; a newer molt's script text never re-runs it.
import { accessInputs } from "../remote/access";
import * as pulumi from "@pulumi/pulumi";
import { RemoteCommand, type ConnectionArgs } from "../remote/command";
import type { HostKeyPair, SshSettings } from "../node";
import type { NodeEntry } from "../../orchestrator/core/nodes";
import { renderInitScript } from "./init";
import { joinMaterialStdin, type JoinMaterial } from "./join-material";
import { KubeadmJoinMaterial } from "./join-material-resource";
import { ClusterHostFiles, type HostFilesFrom } from "./host-files-resource";
import { renderJoinScript } from "./join";
import { renderResetScript } from "./reset";
import type { EndpointRouting } from "./endpoint";
import type { KubeadmBootstrapSettings } from "./settings";

export interface KubeadmBootstrapArgs {
  node: NodeEntry;
  ssh: SshSettings;
  hostKey: HostKeyPair;
  settings: KubeadmBootstrapSettings;
  /** Where SSH reaches the node. */
  sshHost: pulumi.Input<string>;
  /** The node's private address: where its API server and etcd member listen. */
  advertiseAddress: pulumi.Input<string>;
  /** The machine's provider id: a replaced machine gets bootstrapped again. */
  machineId: pulumi.Input<string>;
  /** Node.spec.providerID as the cloud's controller manager writes it; set in the kubelet's configuration. */
  providerId?: pulumi.Input<string>;
  /**
   * For a joining node, one of: `joinMaterial` obtained beforehand (obtainJoinMaterial),
   * or `seed`, a healthy control-plane node the material is then obtained from, once,
   * right before the join (KubeadmJoinMaterial).
   */
  joinMaterial?: pulumi.Input<JoinMaterial>;
  seed?: pulumi.Input<ConnectionArgs>;
  /**
   * The node joined long ago and no other node is left to name as seed (the survivor of
   * a 1-replica roll): its bootstrap exists and is never re-run, so it needs no join input.
   */
  joinedAlready?: boolean;
  /** The cluster's host files, copied from a healthy node before the join (infra/kubeadm/host-files.ts). */
  hostFiles?: HostFilesFrom;
  /** Token lifetime for material obtained from the seed (default 15m). */
  joinTokenTtl?: string;
  /**
   * Replace the host key (the one in the machine's user data) over the first connection,
   * pinned to it, before anything else runs; every later connection pins the new key
   * (infra/remote/host-key-rotation.ts). The command's `hostKey` output is the key to pin.
   */
  rotateHostKey?: boolean;
  /** How the node reaches controlPlaneEndpoint (infra/kubeadm/endpoint.ts; default through the load balancer). */
  endpointRouting?: EndpointRouting;
}

export function kubeadmBootstrapCommand(
  name: string,
  args: KubeadmBootstrapArgs,
  opts: pulumi.CustomResourceOptions,
): RemoteCommand {
  const { node, settings } = args;
  if (!node.kubernetesVersion) {
    throw new Error(`node ${node.name} has no kubernetesVersion: cloud nodes run kubeadm and need one`);
  }
  const version = node.kubernetesVersion;
  const create = pulumi.all([args.advertiseAddress, args.providerId]).apply(([advertiseAddress, providerId]) => {
    const k = { name: node.name, kubernetesVersion: version, advertiseAddress, ...(providerId ? { providerId } : {}) };
    const routing = args.endpointRouting ?? "load-balancer";
    return node.init ? renderInitScript(k, settings, routing) : renderJoinScript(k, settings, routing);
  });
  const stdin =
    node.init || args.joinedAlready
      ? undefined
      : pulumi.secret(pulumi.output(joinMaterial(name, args, opts)).apply((m) => joinMaterialStdin(m)));
  const connection = {
    host: args.sshHost,
    port: args.ssh.port ?? 22,
    user: args.ssh.user,
    privateKey: pulumi.secret(args.ssh.privateKey),
    hostKey: args.hostKey.publicKey,
    ...accessInputs(args.ssh.access, args.ssh.privateKey),
  };
  // Before the join, over the machine's first host key (the bootstrap rotates it after).
  const hostFiles =
    !node.init && !args.joinedAlready && args.hostFiles
      ? new ClusterHostFiles(
          `${name}-host-files`,
          { from: args.hostFiles.from, to: connection, node: node.name, files: args.hostFiles.files },
          opts,
        )
      : undefined;
  return new RemoteCommand(
    name,
    {
      connection,
      create,
      delete: renderResetScript(node.name, settings),
      ...(stdin ? { stdin } : {}),
      ...(args.rotateHostKey ? { rotateHostKey: true } : {}),
      triggers: [args.machineId, node.image, version],
    },
    hostFiles ? pulumi.mergeOptions(opts, { dependsOn: [hostFiles] }) : opts,
  );
}

function joinMaterial(
  name: string,
  args: KubeadmBootstrapArgs,
  opts: pulumi.CustomResourceOptions,
): pulumi.Input<JoinMaterial> {
  if (args.joinMaterial !== undefined) return args.joinMaterial;
  if (args.seed === undefined) {
    throw new Error(
      `node ${args.node.name} joins an existing cluster but neither joinMaterial nor a seed node was given: ` +
        "pass a healthy control-plane node as seed (or set init: true for the first node of a new cluster)",
    );
  }
  const m = new KubeadmJoinMaterial(
    `${name}-join-material`,
    {
      seed: args.seed,
      options: {
        joiningNode: args.node.name,
        ...(args.joinTokenTtl ? { tokenTtl: args.joinTokenTtl } : {}),
        // Before a version upgrade's first new node joins, kubeadm-config must name it.
        ...(args.node.kubernetesVersion ? { raiseClusterVersionTo: args.node.kubernetesVersion } : {}),
      },
    },
    opts,
  );
  return pulumi
    .all([m.token, m.certificateKey, m.caCertHash, m.apiServerGraceSeconds])
    .apply(([token, certificateKey, caCertHash, apiServerGraceSeconds]) => ({
      token,
      certificateKey,
      caCertHash,
      ...(apiServerGraceSeconds !== undefined ? { apiServerGraceSeconds } : {}),
    }));
}
