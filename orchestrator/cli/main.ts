#!/usr/bin/env node
// molt's command line: rollout, plan, status, adopt, disown, version; verify, promote, keygen (cli/promotion.ts).
// Exit codes are part of the interface:
//   0 succeeded or nothing to do      2 invalid input or refused preflight (nothing changed)
//   3 another run holds the stack     4 a new node failed and was rolled back (old nodes intact)
//   5 paused for inspection           6 not confirmed, or no --yes without a terminal (nothing changed)
//   7 failed after changes (see the report; rerun to converge)   130 cancelled (SIGINT/SIGTERM)
//   8 outside the maintenance window (molt:rollout.window; nothing changed)
//   1 unexpected error
import { Command, CommanderError, Option } from "commander";
import { writeMetricsFile } from "../report/metrics";
import { WebhookNotifier } from "../report/notify";
import { redactDeep, redactText } from "../report/redact";
import type { RolloutEvent } from "../events";
import { LiveProgress } from "./progress";
import { inspect } from "../inspect";
import { rollout, type PlannedReplacement } from "../rollout";
import {
  adopt,
  ExpectedHostKeys,
  InvalidAdoptionInputError,
  parseHostList,
  parseImportFlags,
  parseKubeOneOutput,
  type AdoptEvent,
} from "../adopt";
import { registerPromotionCommands } from "./promotion";
import { disown } from "../disown";
import { EXIT, NotConfirmedError, exitFor, errorExit } from "./exit";
import { cancelOnSignals } from "./signals";
import { ts, humanRenderer, waitDeadlines, notifySettings, printInspection, humanAdopt, printJson } from "./render";
import { versions, versionText } from "./version";
import { positiveInteger, checkReportOptions, collect, readInput, confirmKeysOnTty, confirmOnTty } from "./options";

// The AWS SDK (the s3:// lock store) warns on every run that its future releases will need a
// newer Node; the pinned release works on the Node molt supports.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";

export async function main(argv: string[]): Promise<number> {
  const json = argv.includes("--json");
  const program = new Command()
    .name("molt")
    .description("Rolling, immutable, add-first upgrades of kubeadm-style control planes (stacked etcd)")
    .exitOverride()
    // Inherited by the commands: a usage error says what to run for help.
    .showHelpAfterError("(run `molt --help` or `molt <command> --help` for usage; nothing was changed)")
    .configureOutput({ writeErr: (s) => (json ? undefined : process.stderr.write(s)) })
    .option("-V, --version", "print molt's version, the Pulumi engine's and Node.js's (also: molt version)")
    .on("option:version", () => {
      printVersions(json);
      throw new CommanderError(EXIT.ok, "commander.version", "");
    });
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
      "--signing-key <file>",
      "with --verify: the ed25519 private key file that signs the record " +
        "(default: $MOLT_SIGNING_KEY_FILE, then $MOLT_SIGNING_KEY)",
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
    .option(
      "--terminate-leaked",
      "at the end of a converged run, terminate machines under molt's tags for this cluster that the state does " +
        "not hold and etcd does not list (a killed run's; AWS); without it they are only reported",
    )
    .option(
      "--take-over <stack>",
      "the cluster's ownership marker names this stack, which is gone: take the cluster over from it first",
    )
    .action(
      async (opts: {
        stack: string;
        yes?: boolean;
        json?: boolean;
        onFailure?: "rollback" | "pause";
        verbose?: boolean;
        replaceDead?: string[];
        verify?: boolean;
        signingKey?: string;
        maxReplacements?: number;
        metricsFile?: string;
        notify?: string;
        takeOver?: string;
        terminateLeaked?: boolean;
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
              "not confirmed: run with --yes to proceed (stdin is not a terminal, or --json was given, so molt " +
                "cannot ask); nothing was changed",
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
        // Warnings of the run's own reporting (a webhook, the metrics file): on stderr, or with
        // --json as `warning` events; the JSON stream still ends with the summary (held until then).
        const say = (s: string) =>
          json
            ? printJson({ type: "warning", message: redactText(s) })
            : (live?.writeErr ?? ((x: string) => process.stderr.write(x)))(`${ts()}  ! ${redactText(s)}\n`);
        let held: RolloutEvent | undefined;
        const notifier = opts.notify
          ? new WebhookNotifier(opts.notify, {
              onProblem: say,
              includeHookOutput: notifySettings(opts.stack).includeHookOutput,
            })
          : undefined;
        try {
          const summary = await rollout({
            stack: opts.stack,
            signal: ac.signal,
            ...(opts.onFailure ? { onFailure: opts.onFailure } : {}),
            ...(opts.replaceDead ? { replaceDead: opts.replaceDead } : {}),
            ...(opts.maxReplacements !== undefined ? { maxReplacements: opts.maxReplacements } : {}),
            ...(opts.takeOver !== undefined ? { takeOver: opts.takeOver } : {}),
            ...(opts.terminateLeaked ? { terminateLeaked: true } : {}),
            engineOutput: !!opts.verbose,
            verify: !!opts.verify,
            ...(opts.signingKey !== undefined ? { signingKeyFile: opts.signingKey } : {}),
            onEvent: (e) => {
              notifier?.handle(e);
              if (json) {
                if (e.type === "summary") held = e;
                else printJson(e);
              } else {
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
          await notifier?.flush();
          if (held) printJson(held);
        } catch (e) {
          live?.stop();
          await notifier?.flush();
          code = errorExit(e, json, opts.stack);
        } finally {
          live?.stop();
          stop();
        }
      },
    );

  program
    .command("adopt")
    .description(
      "record a running cluster molt did not create (KubeOne, kubeadm by hand) in an empty stack; changes nothing " +
        "on it but its ownership marker",
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
    .option(
      "--take-over <stack>",
      "the cluster's ownership marker names this stack, which is gone: adopt the cluster from it",
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
        takeOver?: string;
        json?: boolean;
      }) => {
        const json = !!opts.json;
        const print = (raw: AdoptEvent | Record<string, unknown>) => {
          const e = redactDeep(raw);
          return json ? process.stdout.write(JSON.stringify(e) + "\n") : humanAdopt(e as AdoptEvent);
        };
        try {
          if (!!opts.terraformOutput === opts.host.length > 0)
            throw new InvalidAdoptionInputError("the command line", [
              "give the cluster either as --terraform-output FILE (KubeOne) or as --host ADDRESS ... " +
                "(--api-endpoint HOST:PORT)",
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
            ...(opts.takeOver !== undefined ? { takeOver: opts.takeOver } : {}),
            ...(!json && process.stdin.isTTY ? { confirmHostKeys: confirmKeysOnTty } : {}),
            onEvent: print,
          });
          print({ type: "summary", result: "adopted", stack: result.stack, nodes: result.nodes.length });
        } catch (e) {
          code = errorExit(e, json, opts.stack);
        }
      },
    );

  program
    .command("version")
    .description("molt's version, the Pulumi engine's molt would run and Node.js's")
    .option("--json", "print one JSON document")
    .action((opts: { json?: boolean }) => printVersions(!!opts.json));

  program
    .command("disown")
    .description(
      "release the cluster from the stack: remove its ownership marker, if it names this stack (nothing else changes)",
    )
    .addOption(stackOpt())
    .option("--json", "print one JSON document")
    .action(async (opts: { stack: string; json?: boolean }) => {
      try {
        const r = await disown({ stack: opts.stack });
        if (opts.json) process.stdout.write(JSON.stringify({ type: "disown-summary", ...r }) + "\n");
        else
          process.stdout.write(
            `${ts()}  ${r.result === "released" ? "RELEASED" : "NOTHING TO RELEASE"}: ${r.message}\n`,
          );
      } catch (e) {
        code = errorExit(e, !!opts.json, opts.stack);
      }
    });

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
          const i = redactDeep(await inspect({ stack: opts.stack }));
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
          message:
            `${(e as Error).message.replace(/^error: /, "")}; run \`molt <command> --help\` for usage; ` +
            `nothing was changed`,
          exitCode: EXIT.invalid,
        }) + "\n",
      );
    return EXIT.invalid;
  }
  return code;
}

function printVersions(json: boolean): void {
  const v = versions();
  process.stdout.write(json ? JSON.stringify(v) + "\n" : versionText(v));
}

if (require.main === module) {
  main(process.argv.slice(2)).then(
    (c) => process.exit(c),
    (e) => process.exit(errorExit(e, process.argv.includes("--json"))),
  );
}
