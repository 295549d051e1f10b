// The program `pulumi` runs when molt's project is run by hand (Pulumi.yaml `main`), e.g.
// `npm run pulumi -- preview --stack lab`: the same program molt's driver runs inline,
// rebuilt from the stack's config file and the node list stored in the stack's outputs.
// So a preview right after a rollout shows no change, and `preview --refresh` shows what
// was changed out of band.
//
// Changes belong to molt (one node at a time, gates between them): a hand-run `pulumi up`
// is refused before any resource is registered, so nothing is changed. `destroy` and
// `refresh` do not run the program and stay the user's own tools.
import { execFileSync } from "node:child_process";
import * as pulumi from "@pulumi/pulumi";
import type { NodeEntry } from "../core/nodes";
import { buildProgram, NODE_LIST_SCHEMA } from "../../infra/program";
import { loadStackConfig, resolveLabImage } from "../config";
import { programInputFor } from "../config/program-input";
import { withLabOwner } from "../lease/lab-claim";
import { leaseHome } from "../lease/hold";
import { backendUrl } from "./engine";
import { nodesWithStoredJoins, type StateResource } from "./targets";

/** Why a hand-run update is refused (undefined while previewing: a preview changes nothing). */
export function refusal(stack: string, dryRun: boolean): string | undefined {
  if (dryRun) return undefined;
  return (
    `molt changes this stack's nodes one at a time, with etcd and Kubernetes checked between them: ` +
    `\`pulumi up\` by hand is refused, and nothing was changed. Run \`npm run rollout -- --stack ${stack}\` ` +
    `(or \`molt rollout --stack ${stack}\`); \`pulumi preview [--refresh]\` shows what differs.`
  );
}

/** The node list in the stack's outputs (empty for a stack molt has not created nodes in). */
export function storedNodes(stack: string, projectDir: string): NodeEntry[] {
  let text: string;
  try {
    text = execFileSync("pulumi", ["stack", "output", "molt", "--json", "--stack", stack, "--non-interactive"], {
      cwd: projectDir,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
  } catch (e) {
    const stderr = String((e as { stderr?: unknown }).stderr ?? "");
    if (/current stack does not have output property|no output named|not found/i.test(stderr)) return [];
    throw new Error(`cannot read the node list of stack ${stack}: ${stderr.trim() || (e as Error).message}`);
  }
  const molt = JSON.parse(text) as { schema?: unknown; nodes?: unknown } | null;
  if (!molt) return [];
  if (molt.schema !== NODE_LIST_SCHEMA || !Array.isArray(molt.nodes))
    throw new Error(
      `the node list stored in stack ${stack} has schema ${String(molt.schema)}, this molt reads ${NODE_LIST_SCHEMA}`,
    );
  return molt.nodes as NodeEntry[];
}

export default async function program(): Promise<Record<string, unknown>> {
  const stack = pulumi.getStack();
  const why = refusal(stack, pulumi.runtime.isDryRun());
  if (why) throw new pulumi.RunError(why);
  const projectDir = process.env.MOLT_PROJECT_DIR ?? process.cwd();
  // The lab's owner as a rollout declares it (lease/lab-claim.ts): this stack in the engine's backend.
  const cfg = withLabOwner(resolveLabImage(loadStackConfig(projectDir, stack)), stack, backendUrl());
  // A stack whose lease lives in the cluster holds the state guard: declared as it is.
  const guarded = leaseHome(backendUrl(), cfg.lockIn, process.env) === "cluster";
  // Every node of the stored list has joined. The one the last change added still holds its
  // join in the state (molt's next change drops it): registered as stored, the rest without.
  const nodes = storedNodes(stack, projectDir);
  const joins = nodes.length
    ? nodesWithStoredJoins(
        storedResources(stack, projectDir),
        nodes.map((n) => n.name),
      )
    : [];
  return buildProgram(programInputFor(cfg, nodes, joins), guarded ? "keep" : undefined)();
}

/** The resources of the stack's state with their links (`stack export`, nothing decrypted). */
export function storedResources(stack: string, projectDir: string): StateResource[] {
  let text: string;
  try {
    text = execFileSync("pulumi", ["stack", "export", "--stack", stack, "--non-interactive"], {
      cwd: projectDir,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
      maxBuffer: 1 << 28,
    });
  } catch (e) {
    const stderr = String((e as { stderr?: unknown }).stderr ?? "");
    throw new Error(`cannot read the state of stack ${stack}: ${stderr.trim() || (e as Error).message}`);
  }
  return (JSON.parse(text) as { deployment?: { resources?: StateResource[] } }).deployment?.resources ?? [];
}
