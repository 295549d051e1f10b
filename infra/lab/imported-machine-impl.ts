// Runtime of LabImportedMachine: a lab machine molt did not create, taken into the stack.
// Taking it over checks that it exists, runs, and is the host adoption pinned (its sshd's
// host key); deleting it is deleting a machine of molt's own.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { alive, machineDir, remove } from "./machine-impl";
import type { LabImportedMachineInputs } from "./imported-machine";
import type { LabMachineInputs } from "./machine";

/** Why `i` cannot be taken over (a message naming what is wrong), or undefined. */
export async function importedMachineProblem(i: LabImportedMachineInputs): Promise<string | undefined> {
  const pub = join(machineDir(i), "root/etc/ssh/ssh_host_ed25519_key.pub");
  if (!existsSync(pub)) return `lab ${i.lab} has no machine named "${i.name}"`;
  const key = (line: string) => line.trim().split(/\s+/).slice(0, 2).join(" ");
  if (key(readFileSync(pub, "utf8")) !== key(i.hostPublicKey))
    return `lab machine "${i.name}" is another host: its SSH host key is not the one adoption pinned for it`;
  if (!(await alive(asMachine(i)))) return `lab machine "${i.name}" is not running`;
  return undefined;
}

export async function create(i: LabImportedMachineInputs): Promise<{ id: string; outs: LabImportedMachineInputs }> {
  const problem = await importedMachineProblem(i);
  if (problem) throw new Error(`cannot take over ${problem}`);
  return { id: `${i.lab}/${i.name}`, outs: i };
}

export async function destroy(i: LabImportedMachineInputs): Promise<void> {
  await remove(asMachine(i));
}

/** The fields of a machine that finding and destroying it use (the rest only create does). */
function asMachine(i: LabImportedMachineInputs): LabMachineInputs {
  return { ...i, bridge: "", image: "", hostPrivateKey: "", authorizedKey: "" };
}
