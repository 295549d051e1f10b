// `molt promote --from staging --to prod`: checks that staging verified its release (the
// record in staging's backend: converged, soaked, intact) and is still healthy now, then
// writes that release into prod's stack config file - a reviewable diff, confirmed or --yes.
// It never touches prod's cluster: prod's rollout is an ordinary `molt rollout --stack prod`.
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync, mkdirSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InvalidConfigError, loadStackConfig, resolveLabImage, stackConfigPath, type StackConfig } from "../config";
import { redactUrl, requireStore } from "../backend/store";
import type { EdgeFactory } from "../edges/open";
import { inspect } from "../inspect";
import { backendUrl, repoRoot } from "../stack/engine";
import { lineDiff, withRelease } from "./config-edit";
import { PromotionNotConfirmedError, PromotionRefusedError } from "./errors";
import type { PromoteEvent } from "./events";
import { readRecord, UnreadableRecordError } from "./record";
import { releaseDigest, type Release } from "./release";
import { describeRelease, promotionTargetProblem, releaseIntentProblems, verificationProblem } from "./rules";

export interface PromoteOptions {
  from: string;
  to: string;
  workDir?: string;
  /** The environment of this process's stacks (PULUMI_BACKEND_URL: the default backend). */
  env?: Record<string, string>;
  /** The source stack's backend, when it is not the target's molt:promotion source nor the default. */
  fromBackend?: string;
  /** Asked with the diff before the file is written; absent: write (the CLI's --yes). */
  confirm?: (diff: string) => Promise<boolean>;
  onEvent?: (e: PromoteEvent) => void;
  /** The source stack's edges for the health check (tests pass fakes). */
  edges?: EdgeFactory;
}

export interface PromoteResult {
  release: Release;
  file: string;
  diff: string;
  written: boolean;
}

export async function promote(o: PromoteOptions): Promise<PromoteResult> {
  const emit = (e: PromoteEvent) => o.onEvent?.(e);
  const check = (check: string, detail: string) => emit({ type: "promote-check", check, ok: true, detail });
  const workDir = o.workDir ?? process.env.MOLT_PROJECT_DIR ?? repoRoot;
  if (o.from === o.to) throw new PromotionRefusedError(`--from and --to are both ${o.from}; nothing was changed`);
  const source = resolveLabImage(loadStackConfig(workDir, o.from));
  const release = source.release;
  if (!release)
    throw new PromotionRefusedError(
      `stack ${o.from} names no molt:release: there is nothing to promote; nothing was changed`,
    );
  const targetProblem = promotionTargetProblem(release, o.from, o.to);
  if (targetProblem) throw new PromotionRefusedError(`${targetProblem}; nothing was changed`);
  check("release", `${o.from} runs ${describeRelease(release)}`);

  // The record, in the source stack's backend.
  const targetFile = stackConfigPath(workDir, o.to);
  if (!existsSync(targetFile))
    throw new PromotionRefusedError(
      `${targetFile} does not exist: create stack ${o.to}'s config (provider, replicas, its settings) first; ` +
        `promote writes only the release into it`,
    );
  const url = o.fromBackend ?? declaredSource(workDir, o.to, o.from) ?? o.env?.PULUMI_BACKEND_URL ?? backendUrl();
  const store = requireStore(url, "verification records", o.env);
  let problem: string | undefined;
  try {
    await store.check();
    const stored = await readRecord(store, o.from, release.name);
    problem = verificationProblem(stored?.record, release, o.from);
    if (!problem)
      check(
        "verified",
        `${o.from} converged on ${release.name} at ${stored!.record.converged.at} ` +
          `(${stored!.record.converged.operations} operation(s), none failed) and stayed healthy for ` +
          `${stored!.record.soak.minutes} min ` +
          `(${stored!.record.soak.observations} observations, until ${stored!.record.soak.passedAt})`,
      );
  } catch (e) {
    problem =
      e instanceof UnreadableRecordError
        ? e.message
        : `the records of stack ${o.from} cannot be read from ${redactUrl(url)}: ` +
          (e as Error).message.split("\n")[0];
  }
  if (problem) throw new PromotionRefusedError(`promotion of ${release.name} refused: ${problem}; nothing was changed`);

  // Still healthy now: the source observed once more, every condition true, nothing to do.
  const now = await inspect({
    stack: o.from,
    workDir,
    env: { ...(o.env ?? {}), PULUMI_BACKEND_URL: url },
    ...(o.edges ? { edges: o.edges } : {}),
  });
  const unhealthy = [
    ...now.conditions.filter((c) => c.status !== "True").map((c) => `${c.type}: ${c.reason}`),
    ...(now.next.kind !== "done" ? [`next operation ${now.next.kind}: ${now.next.reason}`] : []),
    ...now.nodes.filter((n) => n.image !== release.images[o.from]).map((n) => `${n.name} runs ${n.image}`),
    ...(now.nodes.length === 0 ? ["the stack has no nodes"] : []),
  ];
  if (unhealthy.length)
    throw new PromotionRefusedError(
      `promotion of ${release.name} refused: stack ${o.from} is not healthy on it now; nothing was changed:\n` +
        unhealthy.map((u) => `  - ${u}`).join("\n"),
    );
  check("healthy-now", `${o.from}: ${now.nodes.length} nodes on ${release.images[o.from]}, every condition True`);

  // The target's new config: validated as a whole before it is written.
  const before = readFileSync(targetFile, "utf8");
  let after: string;
  try {
    after = withRelease(before, release, o.to);
  } catch (e) {
    throw new InvalidConfigError(targetFile, [(e as Error).message]);
  }
  const target = validateText(after, o.to, targetFile);
  const problems = releaseIntentProblems(release, target.intent, o.to);
  if (problems.length) throw new InvalidConfigError(targetFile, problems);
  const diff = lineDiff(before, after, targetFile);
  const result = { release, file: targetFile, diff };
  const done = (written: boolean) => {
    emit({
      type: "promoted",
      from: o.from,
      to: o.to,
      release: release.name,
      digest: releaseDigest(release),
      file: targetFile,
      written,
    });
    return { ...result, written };
  };
  if (!diff) return done(false);
  emit({ type: "promote-diff", file: targetFile, diff });
  if (o.confirm && !(await o.confirm(diff)))
    throw new PromotionNotConfirmedError(`not confirmed: ${targetFile} was not changed`);
  const tmp = `${targetFile}.molt-promote-${process.pid}`;
  writeFileSync(tmp, after);
  renameSync(tmp, targetFile);
  return done(true);
}

/** The backend the target's molt:promotion.requireVerifiedOn names for `from`, if its config reads. */
function declaredSource(workDir: string, to: string, from: string): string | undefined {
  try {
    return loadStackConfig(workDir, to).promotion.requireVerifiedOn.find((s) => s.stack === from)?.backend;
  } catch {
    // The target's current config may be what promotion repairs; the new text is validated below.
    return undefined;
  }
}

/** Loads `text` as stack `stack`'s config, exactly as a rollout would, without writing the real file. */
function validateText(text: string, stack: string, file: string): StackConfig {
  const dir = mkdtempSync(join(tmpdir(), "molt-promote-"));
  try {
    mkdirSync(join(dir, "stacks"));
    writeFileSync(stackConfigPath(dir, stack), text);
    return resolveLabImage(loadStackConfig(dir, stack));
  } catch (e) {
    if (e instanceof InvalidConfigError) throw new InvalidConfigError(file + " (after promotion)", e.problems);
    throw e;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
