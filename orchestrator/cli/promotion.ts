// `molt verify`, `molt promote` and `molt keygen` (staging across environments, orchestrator/promotion/),
// and the human lines of the promotion events the rollout prints. Exit codes as main.ts:
// verify 0 verified, 2 refused (no converged release, bad input), 3 stack locked,
// 7 the soak failed (the record was removed), 130 cancelled; promote 0 written (or
// nothing to change), 2 refused, 6 not confirmed (nothing written).
import type { Command } from "commander";
import { writeFileSync } from "node:fs";
import { createInterface } from "node:readline/promises";
import type { PromotionEvent, PromoteEvent, VerifyEvent } from "../promotion/events";
import { promote } from "../promotion/promote";
import { verify } from "../promotion/verify";
import { PromotionNotConfirmedError } from "../promotion/errors";
import { redactDeep } from "../report/redact";
import { generateSigningKeyPair, SIGNING_KEY_ENV, SIGNING_KEY_FILE_ENV, SigningKeyError } from "../promotion/signing";

/** Writes a new private key to `file` (never over an existing one); its public key and id. */
function writeKeyPair(file: string): { publicKey: string; keyId: string } {
  const k = generateSigningKeyPair();
  try {
    writeFileSync(file, k.privatePem, { flag: "wx", mode: 0o600 });
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new SigningKeyError(
      code === "EEXIST"
        ? `--out ${file} exists: molt never overwrites a key; choose another path or remove it`
        : code === "ENOENT"
          ? `--out ${file}: its folder does not exist`
          : `--out ${file} cannot be written (${code ?? (e as Error).message})`,
    );
  }
  return { publicKey: k.publicKey, keyId: k.keyId };
}

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
    case "warning":
      return line(`  ! ${e.message}`);
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
    .option(
      "--signing-key <file>",
      `the ed25519 private key that signs the record when the soak passes (default: $${SIGNING_KEY_FILE_ENV}, ` +
        `then $${SIGNING_KEY_ENV}); a path, never the key itself`,
    )
    .option("--json", "one JSON event per line on stdout, ending with a verify-summary event")
    .action(async (opts: { stack: string; signingKey?: string; json?: boolean }) => {
      const json = !!opts.json;
      const ac = new AbortController();
      const stop = ctx.cancelOnSignals(ac, json);
      try {
        const s = await verify({
          stack: opts.stack,
          signal: ac.signal,
          onEvent: print(json, renderVerify),
          ...(opts.signingKey !== undefined ? { signingKeyFile: opts.signingKey } : {}),
        });
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
    .command("keygen")
    .description('make an ed25519 key pair for signed verification records (docs/staging.md, "Signed records")')
    .requiredOption("--out <file>", "where the private key is written (PKCS#8 PEM, mode 0600; never overwritten)")
    .option("--json", "print one JSON document")
    .action((opts: { out: string; json?: boolean }) => {
      const json = !!opts.json;
      try {
        const k = writeKeyPair(opts.out);
        if (json) process.stdout.write(JSON.stringify({ type: "keygen", privateKeyFile: opts.out, ...k }) + "\n");
        else
          process.stdout.write(
            `private key written to ${opts.out} (keep it in the signing environment's CI secret store, as a file ` +
              `for --signing-key / ${SIGNING_KEY_FILE_ENV}, or its content in ${SIGNING_KEY_ENV})\n` +
              `public key ${k.keyId}; in the config of every stack that requires this one's verification:\n\n` +
              `    requireVerifiedOn:\n      - stack: <this stack>\n        publicKey: ${k.publicKey}\n`,
          );
        ctx.setCode(0);
      } catch (e) {
        ctx.setCode(ctx.errorExit(e, json));
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
