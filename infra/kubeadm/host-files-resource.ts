// The cluster's host files on a new node, as a Pulumi resource: copied once, when the node is
// about to join, from a healthy node that holds them (infra/kubeadm/host-files.ts). Outputs are
// paths and a digest only; it never changes afterwards (diff: no changes).
import * as pulumi from "@pulumi/pulumi";
import { implementation } from "../dynamic";
import type { HostFile } from "../../orchestrator/core/host-files";
import type { ConnectionArgs } from "../remote/command";
import type { HostFilesInputs } from "./host-files";

const provider: pulumi.dynamic.ResourceProvider = {
  async create(inputs: HostFilesInputs) {
    const outs = await implementation("infra/kubeadm/host-files").carryHostFiles(inputs);
    return { id: `${inputs.node}-host-files`, outs: { ...inputs, ...outs } };
  },
  // A replaced machine (another address or host key) gets the files again; nothing else changes it.
  async diff(_id: string, olds: HostFilesInputs, news: HostFilesInputs) {
    const replace = olds.to?.host !== news.to?.host || olds.to?.hostKey !== news.to?.hostKey;
    return { changes: replace, replaces: replace ? ["to"] : [], deleteBeforeReplace: true };
  },
};

/** The files a joining node gets, and the connection of the node they come from. */
export interface HostFilesFrom {
  from: pulumi.Input<ConnectionArgs>;
  files: HostFile[];
}

export interface ClusterHostFilesArgs {
  from: pulumi.Input<ConnectionArgs>;
  to: pulumi.Input<ConnectionArgs>;
  node: string;
  files: HostFile[];
}

export class ClusterHostFiles extends pulumi.dynamic.Resource {
  declare readonly copied: pulumi.Output<string[]>;
  declare readonly digest: pulumi.Output<string>;

  constructor(name: string, args: ClusterHostFilesArgs, opts?: pulumi.CustomResourceOptions) {
    super(
      provider,
      name,
      { ...args, copied: undefined, digest: undefined, created: undefined },
      // The connections hold the stack's SSH key.
      pulumi.mergeOptions(opts, { additionalSecretOutputs: ["from", "to"] }),
      "molt",
      "ClusterHostFiles",
    );
  }
}
