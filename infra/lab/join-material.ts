// What a joining lab node needs from a healthy member: the etcd CA certificate and key,
// read over SSH (pinned host key) and handed to the join script on stdin. Read once, at
// creation; later changes of the seed (it may be retired) are ignored.
import * as pulumi from "@pulumi/pulumi";
import { implementation } from "../dynamic";
import type { ConnectionArgs } from "../remote/command";

interface Inputs {
  seed: { host: string; port?: number; user: string; privateKey: string; hostKey: string };
}

const provider: pulumi.dynamic.ResourceProvider = {
  async create(inputs: Inputs) {
    const { SshSession } = implementation("infra/remote/ssh");
    const ssh = await SshSession.connect(inputs.seed);
    try {
      const material = await ssh.run("cat /etc/kubernetes/pki/etcd/ca.crt /etc/kubernetes/pki/etcd/ca.key", "reading the etcd CA");
      return { id: `${inputs.seed.host}`, outs: { seed: inputs.seed, material } };
    } finally {
      ssh.close();
    }
  },
  async diff() {
    return { changes: false };
  },
};

export class JoinMaterial extends pulumi.dynamic.Resource {
  declare readonly material: pulumi.Output<string>;
  constructor(name: string, args: { seed: pulumi.Input<ConnectionArgs> }, opts?: pulumi.CustomResourceOptions) {
    super(provider, name, { ...args, material: undefined }, pulumi.mergeOptions(opts, { additionalSecretOutputs: ["material", "seed"] }), "molt", "LabJoinMaterial");
  }
}
