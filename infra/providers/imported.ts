// Machines molt did not create, taken into a stack by `molt adopt --import HOST=ID`: each
// provider's resource for its machines, declared with importOptions (infra/providers/provider.ts)
// so the engine reads the machine instead of creating it. Only the id is molt's input; every
// other input comes from what the engine read, and no update is ever planned for it.
import { awsSdk, azureSdk } from "./sdk";
import * as pulumi from "@pulumi/pulumi";
import { importOptions } from "./provider";
import { VSPHERE_PROVIDER_VERSION, VSPHERE_TOKENS } from "./vsphere/bindings";

const EC2_INSTANCE = /^i-[0-9a-f]{8}([0-9a-f]{9})?$/;
const AZURE_VM =
  /^\/subscriptions\/[^/]+\/resourceGroups\/([^/]+)\/providers\/Microsoft\.Compute\/virtualMachines\/([^/]+)$/i;
// pulumi-vsphere imports a VM by its inventory path: /<datacenter>/vm/[<folders>/]<name>.
const VSPHERE_VM_PATH = /^\/[^/]+\/vm\/(.+\/)?[^/]+$/;

export const awsImport = {
  problem: (id: string): string | undefined =>
    EC2_INSTANCE.test(id) ? undefined : `"${id}" is not an EC2 instance id (i- and 8 or 17 hex digits)`,
  machine: (name: string, id: string): pulumi.CustomResource =>
    new (awsSdk().ec2.Instance)(name, {}, importOptions(id)),
};

export const azureImport = {
  problem: (id: string): string | undefined =>
    AZURE_VM.test(id)
      ? undefined
      : `"${id}" is not an Azure VM resource id ` +
        "(/subscriptions/SUB/resourceGroups/RG/providers/Microsoft.Compute/virtualMachines/NAME)",
  machine: (name: string, id: string): pulumi.CustomResource => {
    const [, resourceGroupName, vmName] = AZURE_VM.exec(id) ?? [];
    if (!resourceGroupName || !vmName) throw new Error(`internal: ${azureImport.problem(id)}`);
    // The NIC and the disks stay the owner's: only the VM is taken into the stack.
    return new (azureSdk().compute.VirtualMachine)(name, { resourceGroupName, vmName }, importOptions(id));
  },
};

export const vsphereImport = {
  problem: (id: string): string | undefined =>
    VSPHERE_VM_PATH.test(id)
      ? undefined
      : `"${id}" is not a vSphere VM inventory path (/DATACENTER/vm/[FOLDER/]NAME, as govc ls prints it)`,
  machine: (name: string, id: string): pulumi.CustomResource => new VsphereImportedVirtualMachine(name, id),
};

/** pulumi-vsphere's VirtualMachine, with no input of molt's: every one comes from the import. */
class VsphereImportedVirtualMachine extends pulumi.CustomResource {
  constructor(name: string, id: string) {
    super(
      VSPHERE_TOKENS.virtualMachine,
      name,
      {},
      pulumi.mergeOptions({ version: VSPHERE_PROVIDER_VERSION }, importOptions(id)),
    );
  }
}
