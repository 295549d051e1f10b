// The VRRP group's authentication for a joining node, read once from a member's
// keepalived.conf over SSH (an adopted node's: KubeOne's auth_pass; or a molt node's, which
// carries it on): like the join material, a secret output of a resource made at the join,
// fed to the node's keepalived set-up on stdin. A group without authentication gives "".
import * as pulumi from "@pulumi/pulumi";
import { implementation } from "../dynamic";
import type { ConnectionArgs } from "../remote/command";
import type { GroupAuthInputs } from "./group-auth-impl";

const provider: pulumi.dynamic.ResourceProvider = {
  async create(inputs: GroupAuthInputs) {
    const auth = await implementation("infra/vip/group-auth-impl").readGroupAuth(inputs);
    return { id: `${inputs.seed.host}/vrrp`, outs: { ...inputs, auth } };
  },
  // Read once: the member it came from may be retired later.
  async diff() {
    return { changes: false };
  },
};

export class VrrpGroupAuth extends pulumi.dynamic.Resource {
  /** "TYPE PASSWORD" (keepalived's auth_type and auth_pass), or "" for a group without. */
  declare readonly auth: pulumi.Output<string>;
  constructor(
    name: string,
    args: { seed: pulumi.Input<ConnectionArgs>; vip: string; virtualRouterId: number },
    opts?: pulumi.CustomResourceOptions,
  ) {
    super(
      provider,
      name,
      { ...args, auth: undefined },
      pulumi.mergeOptions(opts, { additionalSecretOutputs: ["auth", "seed"] }),
      "molt",
      "VrrpGroupAuth",
    );
  }
}
