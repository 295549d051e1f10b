#!/usr/bin/env node
// molt's command line: rollout, plan, status, adopt; verify and promote (cli/promotion.ts).
// Exit codes are part of the interface:
//   0 succeeded or nothing to do      2 invalid input or refused preflight (nothing changed)
//   3 another run holds the stack     4 a new node failed and was rolled back (old nodes intact)
//   5 paused for inspection           6 not confirmed, or no --yes without a terminal (nothing changed)
//   7 failed after changes (see the report; rerun to converge)   130 cancelled (SIGINT/SIGTERM)
//   8 outside the maintenance window (molt:rollout.window; nothing changed)
//   1 unexpected error
import { Command, InvalidArgumentError, Option } from "commander";
import { accessSync, constants as fsConstants } from "node:fs";
import { dirname } from "node:path";
import { OutsideWindowError } from "../controls/window";
import { writeMetricsFile } from "../report/metrics";
import { notifyUrlProblem, WebhookNotifier } from "../report/notify";
import { LiveProgress } from "./progress";
import { createInterface } from "node:readline/promises";
import { InvalidConfigError, loadStackConfig } from "../config";
import type { RolloutEvent } from "../events";
import type { WaitKey } from "../model";
import { inspect, type Inspection } from "../inspect";
import { hexMemberId } from "../etcd-id";
import { ConcurrentRolloutError } from "../lock";
import { EngineLockedError } from "../stack/engine-lock";
import { CorruptStateError } from "../stack/state";
import { RefusedError, rollout, type PlannedReplacement, type Summary } from "../rollout";
import {
  BackendError,
  classifyEngineError,
  PassphraseError,
  StackNotFoundError,
  stopEnginesNow,
} from "../stack/driver";
import { EngineMissingError, repoRoot } from "../stack/engine";
import { PluginMissingError } from "../stack/plugins";
import { waitDeadlineSeconds } from "../plan";
import { LabHostError } from "../../infra/lab/host";
import {
  adopt,
  AdoptionRefusedError,
  ExpectedHostKeys,
  HostKeysNotConfirmedError,
  InvalidAdoptionInputError,
  InvalidHostKeyInputError,
  parseHostList,
  parseImportFlags,
  parseKubeOneOutput,
  type AdoptEvent,
  type SeenHostKey,
} from "../adopt";
import { readFileSync } from "node:fs";
import { PromotionNotConfirmedError, PromotionRefusedError } from "../promotion/errors";
import { registerPromotionCommands, renderPromotionEvent } from "./promotion";

// The AWS SDK (the s3:// lock store) warns on every run that its future releases will need a
// newer Node; the pinned release works on the Node molt supports.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";

export const EXIT = {
  ok: 0,
  unexpected: 1,
  invalid: 2,
  locked: 3,
  rolledBack: 4,
  paused: 5,
  notConfirmed: 6,
  failed: 7,
  outsideWindow: 8,
  cancelled: 130,
} as const;

/** A --metrics-file or --notify value that cannot work: bad input, nothing is changed. */
class InvalidOptionError extends Error {
  constructor(message: string) {
    super(`${message}; nothing was changed`);
    this.name = "InvalidOptionError";
  }
}

/** A rollout that may not ask (no terminal, or --json) and was not given --yes. */
class NotConfirmedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "NotConfirmedError";
  }
}

function exitFor(s: Summary): number {
  switch (s.result) {
    case "succeeded":
    case "noop":
      return EXIT.ok;
    case "refused":
      return EXIT.invalid;
    case "rolled-back":
      return EXIT.rolledBack;
    case "paused":
      return EXIT.paused;
    case "cancelled":
      return s.reason.startsWith("not confirmed") ? EXIT.notConfirmed : EXIT.cancelled;
    default:
      return EXIT.failed;
  }
}

function errorExit(e: unknown, json: boolean, stack?: string): number {
  // The engine's refusals of a backend or a passphrase are bad input wherever they show.
  if (stack !== undefined)
    e = classifyEngineError(e, stack, process.env.PULUMI_BACKEND_URL ?? "the default backend (~/.molt/state)");
  const known: [new (...a: never[]) => Error, number][] = [
    [InvalidConfigError, EXIT.invalid],
    [StackNotFoundError, EXIT.invalid],
    [CorruptStateError, EXIT.invalid],
    [EngineMissingError, EXIT.invalid],
    [PluginMissingError, EXIT.invalid],
    [BackendError, EXIT.invalid],
    [PassphraseError, EXIT.invalid],
    [RefusedError, EXIT.invalid],
    [LabHostError, EXIT.invalid],
    [InvalidAdoptionInputError, EXIT.invalid],
    [InvalidHostKeyInputError, EXIT.invalid],
    [AdoptionRefusedError, EXIT.invalid],
    [HostKeysNotConfirmedError, EXIT.notConfirmed],
    [ConcurrentRolloutError, EXIT.locked],
    [EngineLockedError, EXIT.locked],
    [NotConfirmedError, EXIT.notConfirmed],
    [PromotionRefusedError, EXIT.invalid],
    [PromotionNotConfirmedError, EXIT.notConfirmed],
    [OutsideWindowError, EXIT.outsideWindow],
    [InvalidOptionError, EXIT.invalid],
  ];
  const code = known.find(([cls]) => e instanceof cls)?.[1] ?? EXIT.unexpected;
  const message = e instanceof Error ? e.message : String(e);
  if (json)
    process.stdout.write(
      JSON.stringify({ type: "error", error: (e as Error)?.name ?? "Error", message, exitCode: code }) + "\n",
    );
  else process.stderr.write(`molt: ${message}\n`);
  return code;
}

const ts = () => new Date().toISOString().slice(11, 19);

/**
 * SIGINT/SIGTERM during a rollout. The first stops the run at the next boundary between
 * operations: an engine step in flight gets the engine's own graceful cancel and finishes.
 * The second terminates the engine now; the third exits at once. Listeners stay installed
 * for the whole run (with none left, Node's default, or the engine runner's signal-exit,
 * would kill molt mid-step). Returns the function that removes them.
 */
function cancelOnSignals(ac: AbortController, json: boolean): () => void {
  // Human output goes to stdout with the events; with --json, stdout stays one event per line.
  const say = (s: string) => (json ? process.stderr.write(`molt: ${s}\n`) : process.stdout.write(`${ts()}  ${s}\n`));
  let received = 0;
  const onSignal = (sig: NodeJS.Signals) => {
    received++;
    if (received === 1) {
      ac.abort();
      return void say(
        `${sig}: stopping at the next boundary between operations; an engine step in flight finishes first ` +
          `(send ${sig} again to stop the engine now)`,
      );
    }
    if (received === 2) {
      const stopped = stopEnginesNow();
      const engines = stopped.map((p) => `pid ${p.pid}: pulumi ${p.command.slice(0, 60)}`).join("; ");
      return void say(
        stopped.length
          ? `${sig} again: terminating the engine now (${engines}). ` +
              `A step it was running may be left half done (a machine made but not joined, or not yet destroyed) ` +
              `and pending in the state; the next \`molt rollout\` clears that and converges. ` +
              `Send ${sig} once more to exit at once.`
          : `${sig} again: no engine step is running; stopping at the next boundary. ` +
              `Send ${sig} once more to exit at once.`,
      );
    }
    say(
      `${sig} a third time: exiting now. The run's lock is taken over by the next run (its process is gone); ` +
        `an etcd or Kubernetes call in flight may not have finished: run \`molt status\`, then \`molt rollout\`.`,
    );
    process.exit(EXIT.cancelled);
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  return () => {
    process.removeListener("SIGINT", onSignal);
    process.removeListener("SIGTERM", onSignal);
  };
}

/**
 * Human output. Waits are one line each: what is awaited and its deadline, said once when
 * the wait starts; on a terminal that line is updated in place while it lasts, elsewhere
 * (CI logs) a "still waiting" line follows every 30 s; when the wait ends, how long it took.
 */
export function humanRenderer(o: {
  write: (s: string) => void;
  tty: boolean;
  /** The deadline of a wait with this key, in seconds (from the stack's molt:timeouts). */
  deadlineOf?: (key: WaitKey) => number | undefined;
  /** A live progress line (cli/progress.ts) shows engine steps: they are not printed as lines. */
  live?: boolean;
  now?: () => number;
}): (e: RolloutEvent) => void {
  const now = o.now ?? Date.now;
  const stamp = () => new Date(now()).toISOString().slice(11, 19);
  const out = (s: string): void => o.write(`${stamp()}  ${s}\n`);
  const seconds = (ms: number) => `${Math.round(ms / 1000)}s`;
  let wait:
    { key: string; reason: string; since: number; deadline?: number; said: number; inPlace: boolean } | undefined;
  /** The last pass seen while waiting: shown once the wait ends. */
  let lastObserved: RolloutEvent | undefined;
  const waitLine = (w: NonNullable<typeof wait>, t: number) =>
    `  … waiting ${seconds(t - w.since)}${w.deadline !== undefined ? ` of at most ${w.deadline}s` : ""}: ${w.reason}`;
  const endWait = () => {
    if (!wait) return;
    const line = `  ✓ waited ${((now() - wait.since) / 1000).toFixed(1)}s: ${wait.reason}`;
    if (wait.inPlace) o.write(`\r\x1b[2K${stamp()}  ${line}\n`);
    else out(line);
    wait = undefined;
  };
  const flushObserved = () => {
    if (lastObserved) render(lastObserved);
    lastObserved = undefined;
  };
  return (e) => {
    if (e.type === "decision" && e.operation.kind === "wait") {
      const op = e.operation;
      const t = now();
      if (wait?.key === op.key) {
        wait.reason = op.reason;
        if (o.tty) o.write(`\r\x1b[2K${stamp()}  ${waitLine(wait, t)}`);
        else if (t - wait.said >= 30_000) {
          wait.said = t;
          out(waitLine(wait, t).replace("waiting", "still waiting"));
        }
        return;
      }
      endWait();
      flushObserved();
      const deadline = o.deadlineOf?.(op.key);
      wait = { key: op.key, reason: op.reason, since: t, said: t, inPlace: o.tty, ...(deadline ? { deadline } : {}) };
      if (o.tty) o.write(`${stamp()}  ${waitLine(wait, t)}`);
      else out(`waiting${deadline ? ` (at most ${deadline}s)` : ""} for: ${op.reason}`);
      return;
    }
    // The wait's own poll intervals are not news; every other event ends a wait.
    if (e.type === "phase" && e.phase === "wait" && e.ok) return;
    if (e.type === "observed" && wait) return void (lastObserved = e);
    endWait();
    flushObserved();
    render(e);
  };
  function render(e: RolloutEvent): void {
    switch (e.type) {
      case "start":
        return out(
          `rollout of stack ${e.stack}: ${e.replicas} × ${e.image}${e.kubernetesVersion ? ` / Kubernetes ${e.kubernetesVersion}` : ""} on ${e.provider}`,
        );
      case "lock":
        return out(
          `holding stack lock ${e.where} (run ${e.runId}, expires ${e.ttlSeconds}s after the last renewal, ` +
            (e.scope === "backend"
              ? "seen by every runner of this backend)"
              : "THIS MACHINE ONLY: molt cannot keep a shared lock in this backend; " +
                "run one rollout per stack at a time)"),
        );
      case "lock-recovered":
        return out(
          e.reason === "expired"
            ? `took over the expired lock of run ${e.previousRunId ?? "?"} (pid ${e.previousPid} on ${e.previousHost}, ` +
                `started ${e.previousStartedAt}; not renewed for ${e.silentSeconds}s)`
            : "took over the lock of a run that died on this machine " +
                `(pid ${e.previousPid}, started ${e.previousStartedAt})`,
        );
      case "lock-renew-failed":
        return out(`  ! renewing the stack lock failed (retried): ${e.message}`);
      case "lock-lost":
        return out(`! ${e.message}: stopping at the next boundary`);
      case "lock-release-failed":
        return out(`! giving the stack lock up failed: ${e.message}`);
      case "engine-lock-cleared":
        return out(
          "removed the engine lock a dead run left (pulumi cancel): " +
            e.locks.map((l) => `pid ${l.pid} on ${l.host} since ${l.since}`).join(", "),
        );
      case "pending-cleared":
        for (const p of e.operations)
          out(
            `cleared an operation a killed engine left pending: ${p.operation} ${p.urn.split("::").pop()}: ${p.reason}`,
          );
        return;
      case "engine-leftovers":
        for (const p of e.processes)
          out(`${p.how} a ${p.kind} process an earlier run left: pid ${p.pid} ${p.command.slice(0, 100)}`);
        return;
      case "observed":
        return out(
          `pass ${e.pass}: ${e.nodes.map((n) => `${n.name}[${n.image}${n.member ? (n.member.learner ? ",learner" : n.member.leader ? ",leader" : "") + (n.member.healthy ? "" : ",unhealthy") : ",no member"}${n.kube ? (n.kube.cordoned ? ",cordoned" : "") + (n.kube.healthy ? "" : ",k8s-unhealthy") : ""}${n.outdated ? ",outdated" : ""}]`).join(" ") || "(no nodes)"}`,
        );
      case "decision":
        return out(`→ ${e.operation.kind}: ${e.operation.reason}`);
      case "phase":
        return out(
          `  ${e.ok ? "✓" : "✗"} ${e.phase} (${e.operation}${e.node ? ` ${e.node}` : ""}) ${(e.ms / 1000).toFixed(1)}s${e.detail ? `: ${e.detail}` : ""}`,
        );
      case "snapshot":
        return out(
          `etcd snapshot saved before the first membership change: ${e.path} (${e.bytes} bytes, from ${e.node})`,
        );
      case "backups-pruned":
        return out(
          `removed ${e.removed.length} older etcd snapshot(s) of stack ${e.stack} ` +
            `(molt:backups.keep ${e.keep}): ${e.removed.join(", ")}`,
        );
      case "engine":
        return out(`  | ${e.line}`);
      case "warning":
        return out(`  ! warning${e.node ? ` (${e.node})` : ""}: ${e.message}`);
      case "hook-output":
        return out(`  | ${e.hook} ${e.node}: ${e.line}`);
      case "hook":
        return out(
          `  ${e.ok ? "✓" : "✗"} ${e.hook} hook (${e.source}) for ${e.node} ${(e.ms / 1000).toFixed(1)}s` +
            (e.error ? `: ${e.error}` : ""),
        );
      case "resource":
        // On a terminal the live line shows every step (cli/progress.ts); a log gets starts and failures.
        if (o.live || e.status === "done") return;
        return out(`  · ${e.op} ${e.resource}${e.status === "failed" ? " FAILED" : ""}`);
      case "left-for-owner":
        return out(
          `adopted machine ${e.node} (${e.address}) retired: ${e.done.join(", ")}; it is left running for its owner`,
        );
      case "adopted-destroyed":
        return out(`adopted machine ${e.node} (${e.address}, imported as ${e.machine}) retired: ${e.done.join(", ")}`);
      case "release-check":
      case "verification":
      case "soak":
        return renderPromotionEvent(e, out);
      case "summary": {
        out(`${e.result.toUpperCase()}: ${e.reason}`);
        for (const m of e.leftForOwner ?? [])
          out(
            `yours to delete: adopted machine ${m.node} (${m.address}, ${m.ssh}${m.providerId ? `, ${m.providerId}` : ""}): ${m.done.join(", ")}; molt no longer uses it`,
          );
        const p = e.phases;
        const f = (ms: number) => `${(ms / 1000).toFixed(1)}s`;
        return out(
          `wall ${f(e.wallMs)}, ${e.operations} operation(s): provision ${f(p.provision)}, etcd ${f(p.etcd)}, ` +
            `waiting ${f(p.wait)}, observing ${f(p.observe)}, snapshot ${f(p.snapshot)}, ` +
            `${p.hook ? `hooks ${f(p.hook)}, ` : ""}molt ${f(p.molt)}` +
            (e.replaced.length ? `; replaced ${e.replaced.join(", ")}` : ""),
        );
      }
    }
  }
}

/** The deadline of each wait, from the stack's molt:timeouts (undefined if the file does not load). */
function waitDeadlines(stack: string): (key: WaitKey) => number | undefined {
  try {
    const timeouts = loadStackConfig(process.env.MOLT_PROJECT_DIR ?? repoRoot, stack).intent.timeouts;
    return (key) => waitDeadlineSeconds(key, timeouts);
  } catch {
    return () => undefined;
  }
}

function printPlanTable(rows: PlannedReplacement[]): void {
  if (rows.length === 0) return void process.stdout.write("no node is outdated\n");
  const header = ["#", "node", "from", "to", "why"];
  const data = rows.map((r) => [String(r.order), r.node, r.from, r.to, r.reason]);
  const widths = header.map((h, i) => Math.max(h.length, ...data.map((d) => d[i].length)));
  for (const row of [header, ...data]) process.stdout.write(row.map((c, i) => c.padEnd(widths[i])).join("  ") + "\n");
}

function printInspection(i: Inspection, what: "plan" | "status"): void {
  const w = (s: string) => process.stdout.write(s + "\n");
  w(
    `stack ${i.stack}${i.exists ? "" : " (not created yet)"}: want ${i.intent.replicas} × ${i.intent.image}${i.intent.kubernetesVersion ? ` / k8s ${i.intent.kubernetesVersion}` : ""} on ${i.intent.provider}, maxSurge ${i.intent.maxSurge}`,
  );
  if (what === "status") {
    w("");
    const kube = i.nodes.some((n) => n.kube) || i.intent.kubernetesVersion !== undefined;
    const imageWidth = Math.max(14, ...i.nodes.map((n) => n.image.length + 2));
    w(
      "NODE".padEnd(24) +
        "IMAGE".padEnd(imageWidth) +
        "MEMBER".padEnd(18) +
        "ROLE".padEnd(10) +
        "HEALTHY  " +
        (kube ? "API".padEnd(10) + "NODE".padEnd(18) : "") +
        "UP-TO-DATE",
    );
    for (const n of i.nodes) {
      const k = n.kube
        ? (n.kube.apiserverVersion ?? "down").padEnd(10) +
          ((n.kube.nodeReady ? "Ready" : "NotReady") + (n.kube.cordoned ? ",cordoned" : "")).padEnd(18)
        : kube
          ? "?".padEnd(10) + "?".padEnd(18)
          : "";
      w(
        n.name.padEnd(24) +
          n.image.padEnd(imageWidth) +
          (n.member ? hexMemberId(n.member.id) : "-").padEnd(18) +
          (n.member ? (n.member.learner ? "learner" : n.member.leader ? "leader" : "voter") : "-").padEnd(10) +
          (n.member?.healthy && n.kube?.healthy !== false ? "yes" : "no").padEnd(9) +
          k +
          (n.outdated ? "no" : "yes"),
      );
    }
    const stray = i.members.filter((m) => !i.nodes.some((n) => n.member?.id === m.id));
    for (const m of stray)
      w(
        `stray member ${hexMemberId(m.id)} ${m.name || "(unstarted)"}${m.learner ? " learner" : ""} ` +
          m.peerURLs.join(","),
      );
    w("");
    for (const c of i.conditions) w(`${c.type.padEnd(22)} ${c.status.padEnd(8)} ${c.reason}`);
    w("");
    if (i.release) {
      w(`release ${i.release.description}`);
      w(`  verification: ${i.release.verification.state}: ${i.release.verification.detail}`);
      if (i.release.requireVerifiedOn.length)
        w(`  rolls only releases verified on: ${i.release.requireVerifiedOn.join(", ")}`);
      w("");
    }
    w(progressLine(i));
    for (const [node, c] of Object.entries(i.certificates ?? {}))
      w(
        `certificates of ${node}: ` +
          (c.ok ? `first to expire ${c.path} at ${c.notAfter}${c.expiring ? " (EXPIRING: replaced)" : ""}` : c.error),
      );
  } else {
    printPlanTable(i.replacements);
  }
  w(`next operation: ${i.next.kind}: ${i.next.reason}`);
}

/** How far a roll is, for `status` (a run stopped by --max-replacements or a window continues from here). */
function progressLine(i: Inspection): string {
  const p = i.progress;
  if (p.outdated.length === 0) return `rollout: ${p.upToDate}/${p.replicas} nodes up to date, nothing to replace`;
  return (
    `rollout: ${p.upToDate}/${p.replicas} nodes up to date; ${p.outdated.length} to replace ` +
    `(${p.outdated.join(", ")})`
  );
}

function positiveInteger(value: string): number {
  if (!/^\d+$/.test(value) || Number(value) < 1)
    throw new InvalidArgumentError(`${JSON.stringify(value)} is not a whole number of at least 1.`);
  return Number(value);
}

/** --metrics-file and --notify are checked before anything runs. */
function checkReportOptions(o: { metricsFile?: string; notify?: string }): void {
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

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

/** A file the user named, or stdin for "-"; a missing one is bad input. */
function readInput(file: string): string {
  try {
    return readFileSync(file === "-" ? 0 : file, "utf8");
  } catch (e) {
    throw new InvalidAdoptionInputError(file, [`cannot be read: ${(e as Error).message}`]);
  }
}

function humanAdopt(e: AdoptEvent | { type: "summary"; stack: string; nodes: number }): void {
  const out = (s: string): void => void process.stdout.write(`${ts()}  ${s}\n`);
  switch (e.type) {
    case "host-key":
      return out(`host key of ${e.host}:${e.port}: ${e.fingerprint} (${e.trust})`);
    case "check":
      return out(`✓ ${e.check}: ${e.detail}`);
    case "recorded":
      out(`recorded in stack ${e.stack} (nothing on the cluster was changed):`);
      for (const n of e.nodes)
        out(
          `  ${n.name.padEnd(24)} ${n.address.padEnd(16)} etcd ${n.etcdVersion}${n.kubernetesVersion ? `, Kubernetes ${n.kubernetesVersion}` : ""}${n.leader ? ", leader" : ""}  ssh ${n.ssh}  (adopted, generation ${n.generation})`,
        );
      return;
    case "summary":
      return out(
        `ADOPTED: ${e.nodes} node(s) of stack ${e.stack}; \`molt plan --stack ${e.stack}\` shows their replacement`,
      );
  }
}

async function confirmKeysOnTty(seen: SeenHostKey[]): Promise<boolean> {
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

async function confirmOnTty(rows: PlannedReplacement[]): Promise<boolean> {
  printPlanTable(rows);
  const rl = createInterface({ input: process.stdin, output: process.stdout });
  try {
    return /^y(es)?$/i.test((await rl.question("Proceed with this rollout? [y/N] ")).trim());
  } finally {
    rl.close();
  }
}

export async function main(argv: string[]): Promise<number> {
  const json = argv.includes("--json");
  const program = new Command()
    .name("molt")
    .description("Rolling, immutable, add-first upgrades of kubeadm-style control planes (stacked etcd)")
    .exitOverride()
    // Inherited by the commands: a usage error says what to run for help.
    .showHelpAfterError("(run `molt --help` or `molt <command> --help` for usage; nothing was changed)")
    .configureOutput({ writeErr: (s) => (json ? undefined : process.stderr.write(s)) });
  let code = EXIT.ok as number;
  const stackOpt = () => new Option("-s, --stack <name>", "stack (stacks/Pulumi.<name>.yaml)").makeOptionMandatory();

  program
    .command("rollout")
    .description("replace every outdated control-plane node, one at a time, add-first")
    .addOption(stackOpt())
    .option("-y, --yes", "do not ask for confirmation")
    .option("--json", "one JSON event per line on stdout, ending with a summary event")
    .addOption(
      new Option("--on-failure <mode>", "what to do with a new node that does not become healthy").choices([
        "rollback",
        "pause",
      ]),
    )
    .option("--verbose", "also print the engine's output")
    .option(
      "--verify",
      "with molt:release: soak the converged release now (molt:promotion.soakMinutes), as molt verify",
    )
    .option(
      "--replace-dead <node...>",
      "replace these nodes whose etcd member is dead, remove-first (quorum checked); never applied to a healthy member",
    )
    .option(
      "--max-replacements <n>",
      "replace at most this many nodes, then stop at a safe boundary (paused, exit 5); the next run continues",
      positiveInteger,
    )
    .option("--metrics-file <path>", "write the run's figures in the Prometheus text format (textfile collector)")
    .option("--notify <url>", "POST the start, failures and pauses, and the summary as JSON to this webhook")
    .action(
      async (opts: {
        stack: string;
        yes?: boolean;
        json?: boolean;
        onFailure?: "rollback" | "pause";
        verbose?: boolean;
        replaceDead?: string[];
        verify?: boolean;
        maxReplacements?: number;
        metricsFile?: string;
        notify?: string;
      }) => {
        const json = !!opts.json;
        try {
          checkReportOptions(opts);
        } catch (e) {
          code = errorExit(e, json);
          return;
        }
        if (!opts.yes && (!process.stdin.isTTY || json)) {
          code = errorExit(
            new NotConfirmedError(
              "not confirmed: run with --yes to proceed (stdin is not a terminal, or --json was given, so molt cannot ask); nothing was changed",
            ),
            json,
          );
          return;
        }
        const ac = new AbortController();
        const stop = cancelOnSignals(ac, json);
        // On a terminal a live line shows the step in progress; lines scroll above it.
        const live =
          !json && process.stdout.isTTY && (process.stdout.rows ?? 0) > 0 ? await LiveProgress.open() : undefined;
        const human = json
          ? undefined
          : humanRenderer({
              write: live ? live.write : (s) => void process.stdout.write(s),
              tty: !!process.stdout.isTTY && !live,
              live: !!live,
              deadlineOf: waitDeadlines(opts.stack),
            });
        const say = (s: string) =>
          json
            ? process.stderr.write(`molt: ${s}\n`)
            : (live?.write ?? ((x: string) => process.stdout.write(x)))(`${ts()}  ! ${s}\n`);
        const notifier = opts.notify ? new WebhookNotifier(opts.notify, { onProblem: say }) : undefined;
        try {
          const summary = await rollout({
            stack: opts.stack,
            signal: ac.signal,
            ...(opts.onFailure ? { onFailure: opts.onFailure } : {}),
            ...(opts.replaceDead ? { replaceDead: opts.replaceDead } : {}),
            ...(opts.maxReplacements !== undefined ? { maxReplacements: opts.maxReplacements } : {}),
            engineOutput: !!opts.verbose,
            verify: !!opts.verify,
            onEvent: (e) => {
              notifier?.handle(e);
              if (json)
                process.stdout.write(JSON.stringify(e, (_k, v) => (typeof v === "bigint" ? v.toString() : v)) + "\n");
              else {
                human!(e);
                live?.onEvent(e);
              }
            },
            ...(opts.yes
              ? {}
              : {
                  confirm: async (rows: PlannedReplacement[]) => {
                    live?.suspend();
                    try {
                      return await confirmOnTty(rows);
                    } finally {
                      live?.resume();
                    }
                  },
                }),
          });
          code = exitFor(summary);
          if (opts.metricsFile)
            await writeMetricsFile(opts.metricsFile, summary).catch((e: Error) =>
              say(`--metrics-file ${opts.metricsFile} could not be written: ${e.message}`),
            );
        } catch (e) {
          live?.stop();
          code = errorExit(e, json, opts.stack);
        } finally {
          live?.stop();
          await notifier?.flush();
          stop();
        }
      },
    );

  program
    .command("adopt")
    .description(
      "record a running cluster molt did not create (KubeOne, kubeadm by hand) in an empty stack; changes nothing on it",
    )
    .addOption(stackOpt())
    .option("--terraform-output <file>", "KubeOne's `terraform output -json` (kubeone_api, kubeone_hosts); - for stdin")
    .option(
      "--host <address[:sshport]>",
      "a control-plane host (instead of --terraform-output); once per node",
      collect,
      [],
    )
    .option("--api-endpoint <host:port>", "with --host: the API load balancer (none for an etcd-only cluster)")
    .option("--host-key <host=SHA256:...>", "an expected SSH host key fingerprint (repeatable)", collect, [])
    .option("--known-hosts <file>", "expected SSH host keys, as an OpenSSH known_hosts file")
    .option(
      "--import <host=id>",
      "take a host's machine into the stack (EC2 instance id, Azure VM id, vSphere VM path, lab machine): " +
        "molt destroys it when it retires the node, instead of leaving it to you (repeatable)",
      collect,
      [],
    )
    .option("--json", "one JSON event per line on stdout")
    .action(
      async (opts: {
        stack: string;
        terraformOutput?: string;
        host: string[];
        apiEndpoint?: string;
        hostKey: string[];
        knownHosts?: string;
        import: string[];
        json?: boolean;
      }) => {
        const json = !!opts.json;
        const print = (e: AdoptEvent | Record<string, unknown>) =>
          json ? process.stdout.write(JSON.stringify(e) + "\n") : humanAdopt(e as AdoptEvent);
        try {
          if (!!opts.terraformOutput === opts.host.length > 0)
            throw new InvalidAdoptionInputError("the command line", [
              "give the cluster either as --terraform-output FILE (KubeOne) or as --host ADDRESS ... (--api-endpoint HOST:PORT)",
            ]);
          if (opts.terraformOutput && opts.apiEndpoint)
            throw new InvalidAdoptionInputError("the command line", [
              "--api-endpoint goes with --host; KubeOne's output names the endpoint (kubeone_api)",
            ]);
          const input = opts.terraformOutput
            ? parseKubeOneOutput(readInput(opts.terraformOutput), opts.terraformOutput)
            : parseHostList(opts.host, opts.apiEndpoint);
          const imports = parseImportFlags(opts.import);
          if (imports.problems.length) throw new InvalidAdoptionInputError("the command line", imports.problems);
          const keys = new ExpectedHostKeys().addFlags(opts.hostKey);
          if (opts.knownHosts) keys.addKnownHosts(readInput(opts.knownHosts), opts.knownHosts);
          for (const h of input.hosts) if (h.hostKey) keys.addInstallerKey(h.sshHost, h.sshPort, h.hostKey);
          const result = await adopt({
            stack: opts.stack,
            input,
            hostKeys: keys,
            imports: imports.requests,
            ...(!json && process.stdin.isTTY ? { confirmHostKeys: confirmKeysOnTty } : {}),
            onEvent: print,
          });
          print({ type: "summary", result: "adopted", stack: result.stack, nodes: result.nodes.length });
        } catch (e) {
          code = errorExit(e, json, opts.stack);
        }
      },
    );

  registerPromotionCommands(program, { setCode: (c) => (code = c), errorExit, cancelOnSignals });

  for (const what of ["plan", "status"] as const) {
    program
      .command(what)
      .description(
        what === "plan"
          ? "dry run: what would be replaced, in which order, why"
          : "nodes, etcd members, leader, versions and conditions",
      )
      .addOption(stackOpt())
      .option("--json", "print one JSON document")
      .action(async (opts: { stack: string; json?: boolean }) => {
        try {
          const i = await inspect({ stack: opts.stack });
          if (opts.json)
            process.stdout.write(JSON.stringify(i, (_k, v) => (typeof v === "bigint" ? v.toString() : v), 2) + "\n");
          else printInspection(i, what);
        } catch (e) {
          code = errorExit(e, !!opts.json, opts.stack);
        }
      });
  }

  try {
    await program.parseAsync(argv, { from: "user" });
  } catch (e) {
    const ce = e as { code?: string; exitCode?: number };
    if (ce.code === "commander.helpDisplayed" || ce.code === "commander.version" || ce.code === "commander.help")
      return EXIT.ok;
    // With --json the usage error is a JSON line too (commander's own text goes to stderr otherwise).
    if (json)
      process.stdout.write(
        JSON.stringify({
          type: "error",
          error: "UsageError",
          message: `${(e as Error).message.replace(/^error: /, "")}; run \`molt <command> --help\` for usage; nothing was changed`,
          exitCode: EXIT.invalid,
        }) + "\n",
      );
    return EXIT.invalid;
  }
  return code;
}

if (require.main === module) {
  main(process.argv.slice(2)).then(
    (c) => process.exit(c),
    (e) => process.exit(errorExit(e, process.argv.includes("--json"))),
  );
}
