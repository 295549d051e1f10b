// One lab control-plane node: host key (made first, so it can be pinned), the machine,
// its etcd bootstrap/teardown over SSH, and its load-balancer attachment.
import { ClusterHostFiles, type HostFilesFrom } from "../kubeadm/host-files-resource";
import type { LabSettings } from "./settings";
import * as pulumi from "@pulumi/pulumi";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import type { NodeEntry } from "../../orchestrator/core/nodes";
import { RemoteCommand, type ConnectionArgs } from "../remote/command";
import { SshKeyPair } from "../remote/keypair";
import { accessInputs } from "../remote/access";
import { type SshAccessSettings } from "../../orchestrator/core/nodes";
import { JoinMaterial } from "./join-material";
import { LabLbAttachment, labLbTargetPort, type LabLbInputs } from "./lb";
import { LabMachine } from "./machine";
import { keepalivedCommand } from "../vip/keepalived-command";

const scriptsDir = resolve(__dirname, "..", "..", "..", "infra", "lab", "scripts");
/**
 * The bootstrap script for one step. The machine's image decides at run time: images
 * with kubeadm get a Kubernetes control-plane node (k8s-*.sh), the others stacked etcd
 * alone (etcd-*.sh). Both share etcd-common.sh (paths, logging, deadlines).
 */
export function labScript(name: "init" | "join" | "reset"): string {
  const read = (f: string) => readFileSync(resolve(scriptsDir, f), "utf8");
  return [
    read("etcd-common.sh"),
    "if [ -x /usr/local/bin/kubeadm ]; then",
    read(`k8s-${name}.sh`),
    "else",
    read(`etcd-${name}.sh`),
    "fi",
    "",
  ].join("\n");
}

export interface LabNodeArgs {
  entry: NodeEntry;
  lab: LabSettings;
  /** The lab's HAProxy (or an adopted cluster's); absent in VIP mode (lab.vip), where keepalived moves the endpoint. */
  lb?: pulumi.Input<LabLbInputs>;
  /** host:port of the endpoint the nodes use (kubeadm's controlPlaneEndpoint). */
  lbEndpoint: string;
  sshUser: string;
  sshAccess?: SshAccessSettings;
  sshPrivateKey: pulumi.Input<string>;
  sshPublicKey: pulumi.Input<string>;
  /**
   * A healthy existing node to join through (absent for the node that initialises); an
   * adopted one has no bootstrap.
   */
  seed?: { connection: pulumi.Output<ConnectionArgs>; bootstrap?: RemoteCommand };
  /** The cluster's host files, copied from a healthy node before the join (infra/kubeadm/host-files.ts). */
  hostFiles?: HostFilesFrom;
  /** molt:encryptionAtRest, for the node that initialises the cluster. */
  encryptionAtRest?: boolean;
  /** The node created just before this one: joins happen one at a time. */
  after?: { bootstrap?: RemoteCommand };
  /** Client URLs of the existing members, for the join. */
  joinEndpoints: pulumi.Input<string>[];
  deadlineSeconds: number;
}

export class LabControlPlaneNode extends pulumi.ComponentResource {
  readonly privateAddress: pulumi.Output<string>;
  readonly sshHost: pulumi.Output<string>;
  readonly sshPort: pulumi.Output<number>;
  readonly hostPublicKey: pulumi.Output<string>;
  readonly providerId: pulumi.Output<string>;
  readonly connection: pulumi.Output<ConnectionArgs>;
  readonly bootstrap: RemoteCommand;

  constructor(name: string, args: LabNodeArgs, opts?: pulumi.ComponentResourceOptions) {
    super("molt:lab:ControlPlaneNode", name, {}, opts);
    const e = args.entry;
    const hostKey = new SshKeyPair(`${name}-hostkey`, { comment: `host key of ${e.name}` }, { parent: this });
    const machine = new LabMachine(
      `${name}-machine`,
      {
        lab: args.lab.lab,
        labRoot: args.lab.labRoot,
        bridge: args.lab.bridge,
        subnet: args.lab.subnet,
        name: e.name,
        image: e.image,
        hostPrivateKey: hostKey.privateKey,
        hostPublicKey: hostKey.publicKey,
        authorizedKey: args.sshPublicKey,
        ...(args.lab.isolated ? { isolated: true } : {}),
      },
      { parent: this },
    );
    this.privateAddress = machine.address;
    this.sshHost = machine.address;
    this.sshPort = machine.sshPort;
    this.hostPublicKey = hostKey.publicKey;
    this.providerId = pulumi.interpolate`lab://${args.lab.lab}/${e.name}`;
    this.connection = pulumi.output({
      host: machine.address,
      port: machine.sshPort,
      user: args.sshUser,
      privateKey: args.sshPrivateKey,
      hostKey: hostKey.publicKey,
      ...accessInputs(args.sshAccess, args.sshPrivateKey),
    });

    const vip = args.lab.vip;
    const environment = {
      NODE_NAME: e.name,
      NODE_IP: machine.address,
      DEADLINE_SECONDS: String(args.deadlineSeconds),
      JOIN_ENDPOINTS: pulumi.all(args.joinEndpoints).apply((eps) => eps.join(",")),
      LB_ENDPOINT: args.lbEndpoint,
      CLUSTER_NAME: args.lab.lab,
      // molt:encryptionAtRest: the first node makes the key (k8s-init.sh); joins get it carried.
      ...(e.init && args.encryptionAtRest ? { ENCRYPTION_AT_REST: "1" } : {}),
      // etcd-only images: the VIP is the cluster's etcd client endpoint (etcd-common.sh).
      ...(vip ? { CLIENT_VIP: vip.address } : {}),
    };
    // The endpoint in front of the API servers: with the lab's HAProxy, the load balancer
    // lists the machine before its bootstrap, like a cloud target group (kubeadm talks to
    // the control-plane endpoint during init and join, and HAProxy's /readyz check keeps
    // traffic away until this API server is ready). In VIP mode, keepalived runs in the
    // machine before its bootstrap, as on vSphere, and is eligible once its endpoint is healthy.
    let endpoint: pulumi.Resource;
    if (vip) {
      endpoint = keepalivedCommand(
        `${name}-keepalived`,
        {
          connection: this.connection,
          vip,
          node: {
            name: e.name,
            generation: e.generation,
            check: e.kubernetesVersion ? { kind: "apiserver", port: 6443 } : { kind: "etcd", metricsPort: 2381 },
          },
          address: machine.address,
          runMode: "process",
          install: "image",
          machineId: machine.id,
          environment: { NODE_NAME: e.name },
          ...(!e.init && args.seed
            ? {
                seed: { connection: args.seed.connection, dependsOn: args.seed.bootstrap ? [args.seed.bootstrap] : [] },
              }
            : {}),
        },
        { parent: this, dependsOn: [machine] },
      );
    } else {
      if (!args.lb) throw new Error(`lab node ${e.name}: no load balancer and no VIP`);
      endpoint = new LabLbAttachment(
        `${name}-lb`,
        {
          lb: args.lb,
          server: e.name,
          address: machine.address,
          port: pulumi.output(args.lb).apply(labLbTargetPort),
        },
        { parent: this, dependsOn: [machine] },
      );
    }
    let stdin: pulumi.Output<string> | undefined;
    // The first node of the list has no older node to join through; it already exists
    // (new nodes are always appended), so its join inputs are never used again. The material
    // comes from the seed, not this machine: it is read while the machine boots (a 30 min
    // token, unused if the machine fails; its join waits for both).
    if (!e.init && args.seed) {
      stdin = new JoinMaterial(
        `${name}-join`,
        { seed: args.seed.connection },
        { parent: this, dependsOn: args.seed.bootstrap ? [args.seed.bootstrap] : [] },
      ).material;
    }
    const hostFiles =
      !e.init && args.hostFiles
        ? new ClusterHostFiles(
            `${name}-host-files`,
            { from: args.hostFiles.from, to: this.connection, node: e.name, files: args.hostFiles.files },
            { parent: this, dependsOn: [machine] },
          )
        : undefined;
    this.bootstrap = new RemoteCommand(
      `${name}-etcd`,
      {
        connection: this.connection,
        create: labScript(e.init ? "init" : "join"),
        // Never run by molt's prune (infra/remote/teardown.ts): a retired machine is destroyed
        // without it. It runs where a machine is torn down otherwise (a rollback of a node
        // that answers, orphans of a failed `up`, a destroy outside molt).
        delete: labScript("reset"),
        environment,
        stdin,
      },
      {
        parent: this,
        dependsOn: [
          machine,
          endpoint,
          ...(args.after?.bootstrap ? [args.after.bootstrap] : []),
          ...(hostFiles ? [hostFiles] : []),
        ],
        customTimeouts: { create: `${args.deadlineSeconds + 60}s` },
      },
    );
    // The whole endpoint, as a cloud node registers it (providers/cloud-node.ts): known once the
    // machine answers, so molt connects to it while the join still runs (stack/edge.ts).
    this.registerOutputs({
      privateAddress: this.privateAddress,
      sshHost: this.sshHost,
      sshPort: this.sshPort,
      hostPublicKey: this.hostPublicKey,
      providerId: this.providerId,
    });
  }
}
