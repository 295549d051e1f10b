// Join material as a Pulumi resource: obtained once, when the joining node's bootstrap is
// about to be created, from a healthy "seed" control-plane node over SSH (pinned host
// key), and kept only as secret outputs. It never changes afterwards (diff: no changes),
// so retiring the seed later does not touch it. Same pattern as the lab's join material.
import * as pulumi from "@pulumi/pulumi";
import { implementation } from "../dynamic";
import type { ConnectionArgs } from "../remote/command";
import type { SshTarget } from "../remote/ssh";
import type { JoinMaterialOptions } from "./join-material";

const provider: pulumi.dynamic.ResourceProvider = {
  async create(inputs: { seed: SshTarget; options: JoinMaterialOptions }) {
    const material = await implementation("infra/kubeadm/join-material").createFromSeed(inputs);
    return { id: `${inputs.options.joiningNode}-join-material`, outs: { ...inputs, ...material } };
  },
  async diff() {
    return { changes: false };
  },
};

export interface KubeadmJoinMaterialArgs {
  /** A healthy control-plane node, reached over SSH. */
  seed: pulumi.Input<ConnectionArgs>;
  options: JoinMaterialOptions;
}

export class KubeadmJoinMaterial extends pulumi.dynamic.Resource {
  declare readonly token: pulumi.Output<string>;
  declare readonly certificateKey: pulumi.Output<string>;
  declare readonly caCertHash: pulumi.Output<string>;
  /** Absent in material made before molt read it (join-material.ts). */
  declare readonly apiServerGraceSeconds: pulumi.Output<number | undefined>;

  constructor(name: string, args: KubeadmJoinMaterialArgs, opts?: pulumi.CustomResourceOptions) {
    const secrets = { additionalSecretOutputs: ["token", "certificateKey", "seed"] };
    super(
      provider,
      name,
      { ...args, token: undefined, certificateKey: undefined, caCertHash: undefined, apiServerGraceSeconds: undefined },
      pulumi.mergeOptions(opts, secrets),
      "molt",
      "KubeadmJoinMaterial",
    );
  }
}
