// The Pulumi program molt runs inline: the program of the stack's provider, looked up in
// infra/providers/registry.ts (the lab's: infra/lab/program.ts; every cloud's:
// infra/providers/cloud-program.ts). Each writes the node list back into the stack
// outputs, which is where molt reads it from: the list lives with the state.
import type { LabProgramInput } from "./lab/program";
import type { CloudProgramInput } from "./providers/provider";
import { providerOf } from "./providers/registry";
import { declareGuard, type GuardMode } from "./guard";

export { NODE_LIST_SCHEMA, type MoltOutputs } from "./outputs";
export type { CloudProgramInput, LabProgramInput };

export type ProgramInput = LabProgramInput | CloudProgramInput;

/** `guard`: declare the state guard (infra/guard.ts) first, and make every resource depend on it. */
export function buildProgram(input: ProgramInput, guard?: GuardMode): () => Promise<Record<string, unknown>> {
  return async () => {
    if (guard) declareGuard(guard);
    const def = providerOf(input.provider);
    if (!def) throw new Error(`internal: no provider ${JSON.stringify(input.provider)} in infra/providers/registry.ts`);
    return def.family === "lab" ? def.program(input as LabProgramInput) : def.program(input as CloudProgramInput);
  };
}
