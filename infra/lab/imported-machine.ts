// A lab machine molt did not create, taken into the stack by `molt adopt --import HOST=NAME`
// (runtime in imported-machine-impl.ts). The engine's own import does not work for dynamic
// providers (pulumi/pulumi#16175: `read` is never given the provider), so the lab does what
// the import does for the clouds' machines in its `create`: it finds the existing machine,
// checks it is the pinned host, and records it; nothing is made. Deleting it destroys the
// machine, as for a machine of molt's own.
import * as pulumi from "@pulumi/pulumi";
import { implementation } from "../dynamic";

export interface LabImportedMachineInputs {
  lab: string;
  labRoot: string;
  subnet: string;
  /** The machine's name in the lab (the import id). */
  name: string;
  /** The host key adoption pinned for it: the machine found must present it. */
  hostPublicKey: string;
}

type In<T> = { [K in keyof T]: pulumi.Input<T[K]> };

const provider: pulumi.dynamic.ResourceProvider = {
  async create(inputs: LabImportedMachineInputs) {
    return implementation("infra/lab/imported-machine-impl").create(inputs);
  },
  async diff() {
    // Nothing of it is molt's to change (as ignoreChanges ["*"] for the clouds' imports).
    return { changes: false };
  },
  async delete(_id: string, props: LabImportedMachineInputs) {
    await implementation("infra/lab/imported-machine-impl").destroy(props);
  },
};

export class LabImportedMachine extends pulumi.dynamic.Resource {
  constructor(name: string, args: In<LabImportedMachineInputs>, opts?: pulumi.CustomResourceOptions) {
    super(provider, name, args, opts, "molt", "LabImportedMachine");
  }
}
