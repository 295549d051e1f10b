// What a joining lab node needs from a healthy member, read over SSH (pinned host key) and
// handed to the join script on stdin. Etcd-only images: the etcd CA certificate and key.
// Kubernetes images: the cluster-wide CAs and service-account keys (kubeadm's list for
// manual certificate distribution) and a new bootstrap token with a 30 min TTL. Read once,
// at creation; later changes of the seed (it may be retired) are ignored.
import * as pulumi from "@pulumi/pulumi";
import { implementation } from "../dynamic";
import type { ConnectionArgs } from "../remote/command";
import type { SshTarget } from "../remote/ssh";

const SHARED_PKI = [
  "ca.crt",
  "ca.key",
  "sa.key",
  "sa.pub",
  "front-proxy-ca.crt",
  "front-proxy-ca.key",
  "etcd/ca.crt",
  "etcd/ca.key",
];
/** The script that prints the join material on a healthy node (also run directly by the bench's raw baseline). */
export const JOIN_BUNDLE = `set -e
if [ -x /usr/local/bin/kubeadm ]; then
  for f in ${SHARED_PKI.join(" ")}; do
    echo "file /etc/kubernetes/pki/$f"; base64 "/etc/kubernetes/pki/$f"; echo end
  done
  echo "token $(kubeadm token create --kubeconfig /etc/kubernetes/admin.conf --ttl 30m \\
    --description 'molt: control-plane join')"
else
  cat /etc/kubernetes/pki/etcd/ca.crt /etc/kubernetes/pki/etcd/ca.key
fi`;

interface Inputs {
  seed: SshTarget;
}

const provider: pulumi.dynamic.ResourceProvider = {
  async create(inputs: Inputs) {
    const { SshSession } = implementation("infra/remote/ssh");
    const ssh = await SshSession.connect(inputs.seed);
    try {
      const material = await ssh.run(JOIN_BUNDLE, "reading the join material");
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
    super(
      provider,
      name,
      { ...args, material: undefined },
      pulumi.mergeOptions(opts, { additionalSecretOutputs: ["material", "seed"] }),
      "molt",
      "LabJoinMaterial",
    );
  }
}
