// `molt verify` and `molt promote` (staging across environments, orchestrator/promotion/),
// and the human lines of the promotion events the rollout prints. Exit codes as main.ts:
// verify 0 verified, 2 refused (no converged release, bad input), 3 stack locked,
// 7 the soak failed (the record was removed), 130 cancelled; promote 0 written (or
// nothing to change), 2 refused, 6 not confirmed (nothing written).
import type { Command } from "commander";
import { createInterface } from "node:readline/promises";
import type { PromotionEvent, PromoteEvent, VerifyEvent } from "../promotion/events";
import { promote } from "../promotion/promote";
import { verify } from "../promotion/verify";
import { PromotionNotConfirmedError } from "../promotion/errors";
import { redactDeep } from "../report/redact";

export interface CliContext {
  setCode(code: number): void;
  errorExit(e: unknown, json: boolean, stack?: string): number;
  /** Installs SIGINT/SIGTERM handling that aborts `ac`; returns the remover. */
  cancelOnSignals(ac: AbortController, json: boolean): () => void;
}

const ts = () => new Date().toISOString().slice(11, 19);
const line = (s: string) => void process.stdout.write(`${ts()}  ${s}\n`);

/** A promotion event as one human line (shared with the rollout's renderer). */
export function renderPromotionEvent(e: PromotionEvent, out: (s: string) => void): void {
  switch (e.type) {
    case "release-check":
      for (const s of e.sources) out(`${s.verified ? "✓" : "✗"} release ${e.release} on ${s.stack}: ${s.detail}`);
      return;
    case "verification":
      return out(`verification of ${e.release} on ${e.stack}: ${e.state}: ${e.detail}`);
    case "soak":
      return out(
        `  ${e.healthy ? "✓" : "✗"} soak ${e.release} #${e.observation} ` +
          `${Math.round(e.elapsedMs / 1000)}s/${Math.round(e.soakMs / 1000)}s: ${e.detail}`,
      );
  }
}

function renderVerify(e: VerifyEvent): void {
  if (e.type === "verify-summary") return line(`${e.result.toUpperCase()}: ${e.reason}`);
  if (e.type === "warning") return line(`  ! ${e.message}`);
  renderPromotionEvent(e, line);
}

function renderPromote(e: PromoteEvent): void {
  switch (e.type) {
    case "promote-check":
      return line(`✓ ${e.check}: ${e.detail}`);
    case "promote-diff":
      return void process.stdout.write(e.diff);
    case "promoted":
      return line(
        e.written
          ? `PROMOTED: release ${e.release} written to ${e.file}; review and commit it, then ` +
              `molt rollout --stack ${e.to}`
          : `NOTHING TO CHANGE: ${e.file} already names release ${e.release}`,
      );
  }
}

const print = (json: boolean, human: (e: never) => void) => (raw: object) => {
  const e = redactDeep(raw);
  return json ? process.stdout.write(JSON.stringify(e) + "\n") : human(e as never);
};

async function confirmOnTty(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stdout });
  try {
    return /^y(es)?$/i.test((await rl.question(question)).trim());
  } finally {
    rl.close();
  }
}

export function registerPromotionCommands(program: Command, ctx: CliContext): void {
  program
    .command("verify")
    .description("soak the release the stack converged on (molt:promotion.soakMinutes), or resume the soak")
    .requiredOption("-s, --stack <name>", "stack (stacks/Pulumi.<name>.yaml)")
    .option("--json", "one JSON event per line on stdout, ending with a verify-summary event")
    .action(async (opts: { stack: string; json?: boolean }) => {
      const json = !!opts.json;
      const ac = new AbortController();
      const stop = ctx.cancelOnSignals(ac, json);
      try {
        const s = await verify({ stack: opts.stack, signal: ac.signal, onEvent: print(json, renderVerify) });
        ctx.setCode(
          s.result === "verified" || s.result === "already-verified" ? 0 : s.result === "soak-failed" ? 7 : 130,
        );
      } catch (e) {
        ctx.setCode(ctx.errorExit(e, json, opts.stack));
      } finally {
        stop();
      }
    });

  program
    .command("promote")
    .description("write the release a stack verified into another stack's config (never touches its cluster)")
    .requiredOption("--from <stack>", "the stack that verified the release (e.g. staging)")
    .requiredOption("--to <stack>", "the stack whose stacks/Pulumi.<stack>.yaml gets the release (e.g. prod)")
    .option("--from-backend <url>", "the source stack's backend, when it is not the default nor named in --to's config")
    .option("-y, --yes", "write without asking")
    .option("--json", "one JSON event per line on stdout")
    .action(async (opts: { from: string; to: string; fromBackend?: string; yes?: boolean; json?: boolean }) => {
      const json = !!opts.json;
      try {
        // Without --yes molt asks on a terminal; elsewhere it may not guess.
        if (!opts.yes && (!process.stdin.isTTY || json))
          throw new PromotionNotConfirmedError(
            "not confirmed: run with --yes to write the release (stdin is not a terminal, or --json was given, " +
              "so molt cannot ask); nothing was changed",
          );
        const r = await promote({
          from: opts.from,
          to: opts.to,
          ...(opts.fromBackend ? { fromBackend: opts.fromBackend } : {}),
          onEvent: print(json, renderPromote),
          ...(opts.yes
            ? {}
            : { confirm: () => confirmOnTty(`Write this change to stack ${opts.to}'s config? [y/N] `) }),
        });
        void r;
        ctx.setCode(0);
      } catch (e) {
        ctx.setCode(ctx.errorExit(e, json, opts.to));
      }
    });
}
