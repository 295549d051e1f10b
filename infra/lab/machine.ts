// A lab machine as a Pulumi resource (dynamic provider; runtime in machine-impl.ts).
import * as pulumi from "@pulumi/pulumi";
import { implementation } from "../dynamic";

export interface LabMachineInputs {
  lab: string;
  labRoot: string;
  bridge: string;
  subnet: string;
  name: string;
  image: string;
  hostPrivateKey: string;
  hostPublicKey: string;
  authorizedKey: string;
  /** On an isolated bridge (no host address): reached only through a bastion. */
  isolated?: boolean;
}

export interface LabMachineOutputs {
  address: string;
  netns: string;
  sshPort: number;
}

type In<T> = { [K in keyof T]: pulumi.Input<T[K]> };

const IMMUTABLE: (keyof LabMachineInputs)[] = [
  "lab",
  "labRoot",
  "bridge",
  "subnet",
  "name",
  "image",
  "hostPrivateKey",
  "hostPublicKey",
  "authorizedKey",
  "isolated",
];

const provider: pulumi.dynamic.ResourceProvider = {
  async create(inputs: LabMachineInputs) {
    return implementation("infra/lab/machine-impl").create(inputs);
  },
  async diff(_id: string, olds: LabMachineInputs, news: LabMachineInputs) {
    // A machine is immutable: any change is a replacement, which molt never plans.
    const replaces = IMMUTABLE.filter((k) => olds[k] !== news[k]);
    return { changes: replaces.length > 0, replaces, deleteBeforeReplace: true };
  },
  async delete(_id: string, props: LabMachineInputs) {
    await implementation("infra/lab/machine-impl").remove(props);
  },
};

export class LabMachine extends pulumi.dynamic.Resource {
  declare readonly address: pulumi.Output<string>;
  declare readonly netns: pulumi.Output<string>;
  declare readonly sshPort: pulumi.Output<number>;

  constructor(name: string, args: In<LabMachineInputs>, opts?: pulumi.CustomResourceOptions) {
    super(
      provider,
      name,
      { ...args, address: undefined, netns: undefined, sshPort: undefined },
      pulumi.mergeOptions(opts, { additionalSecretOutputs: ["hostPrivateKey"] }),
      "molt",
      "LabMachine",
    );
  }
}
