// `molt adopt --import HOST=ID`: machines taken into the stack with their nodes, so that molt
// destroys them when it retires those nodes instead of leaving them to their owner. Which
// host each id belongs to and whether the id has the provider's shape are checked before
// anything else; the machine itself before anything is recorded (the lab here, the clouds by
// previewing the engine's import in record.ts).
import { importedMachineProblem } from "../../infra/lab/imported-machine-impl";
import { providerOf } from "../../infra/providers/registry";
import type { StackConfig } from "../config";
import type { Refuse } from "./errors";
import type { AdoptionHost } from "./input";

/** `HOST=ID` as the command line gives it. */
export interface ImportRequest {
  host: string;
  id: string;
}

/** Parses `--import HOST=ID` flags; problems are returned, one per bad flag. */
export function parseImportFlags(flags: readonly string[]): { requests: ImportRequest[]; problems: string[] } {
  const requests: ImportRequest[] = [];
  const problems: string[] = [];
  for (const f of flags) {
    const at = f.indexOf("=");
    const host = at > 0 ? f.slice(0, at).trim() : "";
    const id = at > 0 ? f.slice(at + 1).trim() : "";
    if (!host || !id)
      problems.push(`--import ${JSON.stringify(f)}: HOST=ID (a host of the cluster = its machine's id)`);
    else requests.push({ host, id });
  }
  return { requests, problems };
}

/** Each request's host among the adopted ones (by address, SSH host or hostname), its id checked. */
export function matchImports(
  requests: readonly ImportRequest[],
  hosts: readonly AdoptionHost[],
  cfg: Pick<StackConfig, "intent">,
  refuse: Refuse,
): Map<AdoptionHost, string> {
  const provider = providerOf(cfg.intent.provider);
  const byHost = new Map<AdoptionHost, string>();
  const problems: string[] = [];
  const ids = new Set<string>();
  for (const r of requests) {
    const h = hosts.find((x) => [x.address, x.sshHost, x.hostname].includes(r.host));
    const problem = provider?.importIdProblem(r.id);
    if (!h)
      problems.push(
        `--import ${r.host}=${r.id}: ${r.host} is none of the cluster's hosts ` +
          `(${hosts.map((x) => x.address).join(", ")})`,
      );
    else if (byHost.has(h)) problems.push(`--import: host ${r.host} is named twice`);
    else if (problem) problems.push(`--import ${r.host}=${r.id}: ${problem}`);
    else if (ids.has(r.id)) problems.push(`--import: machine ${r.id} is named for two hosts`);
    else byHost.set(h, r.id);
    ids.add(r.id);
  }
  if (problems.length) refuse(...problems);
  return byHost;
}

/** The lab's machines are checked here: each runs, and presents the host key pinned for its host. */
export async function checkLabImports(
  imports: ReadonlyMap<AdoptionHost, string>,
  seen: ReadonlyMap<AdoptionHost, string>,
  cfg: Pick<StackConfig, "lab">,
  refuse: Refuse,
): Promise<void> {
  if (!cfg.lab || imports.size === 0) return;
  const problems: string[] = [];
  for (const [h, id] of imports) {
    const problem = await importedMachineProblem({
      lab: cfg.lab.lab,
      labRoot: cfg.lab.labRoot,
      subnet: cfg.lab.subnet,
      name: id,
      hostPublicKey: seen.get(h)!,
    });
    if (problem) problems.push(`--import ${h.address}=${id}: ${problem}`);
  }
  if (problems.length) refuse(...problems);
}
