// Command-line values checked before anything runs, files read as input, and the questions
// asked on a terminal.
import { InvalidArgumentError } from "commander";
import { accessSync, constants as fsConstants } from "node:fs";
import { dirname } from "node:path";
import { notifyUrlProblem } from "../report/notify";
import { createInterface } from "node:readline/promises";
import { type PlannedReplacement } from "../rollout";
import { InvalidAdoptionInputError, type SeenHostKey } from "../adopt";
import { readFileSync } from "node:fs";
import { InvalidOptionError } from "./exit";
import { printPlanTable } from "./render";

export function positiveInteger(value: string): number {
  if (!/^\d+$/.test(value) || Number(value) < 1)
    throw new InvalidArgumentError(`${JSON.stringify(value)} is not a whole number of at least 1.`);
  return Number(value);
}

/** --metrics-file and --notify are checked before anything runs. */
export function checkReportOptions(o: { metricsFile?: string; notify?: string }): void {
  if (o.metricsFile !== undefined) {
    try {
      accessSync(dirname(o.metricsFile), fsConstants.W_OK);
    } catch {
      throw new InvalidOptionError(
        `--metrics-file ${o.metricsFile}: its directory ${dirname(o.metricsFile)} does not exist or is not ` +
          "writable; point it at node_exporter's textfile directory (e.g. /var/lib/node_exporter/textfile/molt.prom)",
      );
    }
  }
  const problem = o.notify !== undefined ? notifyUrlProblem(o.notify) : undefined;
  if (problem) throw new InvalidOptionError(problem);
}

export function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

/** A file the user named, or stdin for "-"; a missing one is bad input. */
export function readInput(file: string): string {
  try {
    return readFileSync(file === "-" ? 0 : file, "utf8");
  } catch (e) {
    throw new InvalidAdoptionInputError(file, [`cannot be read: ${(e as Error).message}`]);
  }
}

export async function confirmKeysOnTty(seen: SeenHostKey[]): Promise<boolean> {
  process.stdout.write("These host keys are not named by --host-key, --known-hosts or the installer:\n");
  for (const k of seen) process.stdout.write(`  ${k.host}:${k.port}  ${k.keyLine.split(" ")[0]}  ${k.fingerprint}\n`);
  const rl = createInterface({ input: process.stdin, output: process.stdout });
  try {
    return /^yes$/i.test(
      (await rl.question("Compare them with the machines' own (ssh-keygen -lf). Trust them? Type yes: ")).trim(),
    );
  } finally {
    rl.close();
  }
}

export async function confirmOnTty(rows: PlannedReplacement[]): Promise<boolean> {
  printPlanTable(rows);
  const rl = createInterface({ input: process.stdin, output: process.stdout });
  try {
    return /^y(es)?$/i.test((await rl.question("Proceed with this rollout? [y/N] ")).trim());
  } finally {
    rl.close();
  }
}
