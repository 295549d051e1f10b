// An SSH key pair generated once, at creation, and kept (encrypted) in the stack state:
// host keys are made before their machine exists so every client can pin them, and the
// lab's client key lets a fresh clone on another runner reach the same nodes.
import * as pulumi from "@pulumi/pulumi";
import { implementation } from "../dynamic";

const provider: pulumi.dynamic.ResourceProvider = {
  async create(inputs: { comment: string }) {
    const { privateKey, publicKey } = implementation("infra/remote/ssh").generateSshKeyPair(inputs.comment);
    return { id: inputs.comment, outs: { comment: inputs.comment, privateKey, publicKey } };
  },
  async diff() {
    return { changes: false };
  },
};

export class SshKeyPair extends pulumi.dynamic.Resource {
  declare readonly privateKey: pulumi.Output<string>;
  declare readonly publicKey: pulumi.Output<string>;
  constructor(name: string, args: { comment: pulumi.Input<string> }, opts?: pulumi.CustomResourceOptions) {
    super(
      provider,
      name,
      { ...args, privateKey: undefined, publicKey: undefined },
      pulumi.mergeOptions(opts, { additionalSecretOutputs: ["privateKey"] }),
      "molt",
      "SshKeyPair",
    );
  }
}
