// An adopted Azure VM's place in the API load balancer's backend pool, as a resource of the
// stack (`<node>-api`, like a molt node's NIC, which carries the pool itself): declared when
// the node is recorded (it checks the VM is there, and changes nothing), deleted by the update
// that drops the node, which takes the VM's NIC out of the pool. Runtime: pool-membership-impl.ts.
import * as pulumi from "@pulumi/pulumi";
import { implementation } from "../../dynamic";
import type { MembershipInputs, MembershipOutputs } from "./pool-membership-impl";

const IMPL = "infra/providers/azure/pool-membership-impl";

const provider: pulumi.dynamic.ResourceProvider = {
  async create(inputs: MembershipInputs) {
    return implementation(IMPL).createMembership(inputs);
  },
  async diff(_id: string, olds: MembershipOutputs, news: MembershipInputs) {
    const changed = olds.vmId !== news.vmId || olds.backendPoolId !== news.backendPoolId;
    return { changes: changed, replaces: changed ? ["backendPoolId"] : [] };
  },
  async delete(_id: string, props: MembershipOutputs) {
    await implementation(IMPL).deleteMembership(props);
  },
};

export class AzureBackendPoolMembership extends pulumi.dynamic.Resource {
  declare readonly nicId: pulumi.Output<string>;
  constructor(
    name: string,
    args: { vmId: pulumi.Input<string>; backendPoolId: pulumi.Input<string> },
    opts?: pulumi.CustomResourceOptions,
  ) {
    super(
      provider,
      name,
      { ...args, nicId: undefined, ipConfigurations: undefined },
      opts,
      "molt",
      "AzureBackendPoolMembership",
    );
  }
}
