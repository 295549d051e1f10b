// The Automation API edge: opens a stack of molt's project with an inline program, on the
// backend and engine chosen in engine.ts. Everything that runs `pulumi` goes through here.
import { LocalWorkspace, PulumiCommand, type PulumiFn, type Stack } from "@pulumi/pulumi/automation";
import { dirname } from "node:path";
import { engineEnv, locateEngine, repoRoot } from "./engine";

export interface OpenStackOptions {
  stackName: string;
  program: PulumiFn;
  /** Directory with Pulumi.yaml (and stacks/); molt's repository root by default. */
  workDir?: string;
  /** Create the stack in the backend if it does not exist (a rollout does; status does not). */
  create?: boolean;
  /** Extra environment for engine processes (tests point PULUMI_BACKEND_URL elsewhere). */
  env?: Record<string, string>;
}

export class StackNotFoundError extends Error {
  constructor(readonly stackName: string, backend: string) {
    super(`stack "${stackName}" does not exist in ${backend}; nothing was changed. Run \`molt rollout --stack ${stackName}\` to create it, or check --stack and PULUMI_BACKEND_URL.`);
    this.name = "StackNotFoundError";
  }
}

export async function openStack(o: OpenStackOptions): Promise<Stack> {
  const engine = locateEngine();
  const pulumiCommand = await PulumiCommand.get({ root: dirname(engine.binDir), skipVersionCheck: false });
  const envVars = engineEnv(engine, o.env ?? {});
  const args = { stackName: o.stackName, projectName: "molt", program: o.program };
  const wsOpts = { workDir: o.workDir ?? repoRoot, pulumiCommand, envVars };
  if (o.create === false) {
    try {
      return await LocalWorkspace.selectStack(args, wsOpts);
    } catch (e) {
      if (e instanceof Error && /no stack named|not found/i.test(e.message)) throw new StackNotFoundError(o.stackName, envVars.PULUMI_BACKEND_URL);
      throw e;
    }
  }
  return LocalWorkspace.createOrSelectStack(args, wsOpts);
}
