// `molt promote --from staging --to prod`: checks that staging verified its release (the
// record in staging's backend: converged, soaked, intact, signed with the key prod's
// molt:promotion.requireVerifiedOn trusts for staging) and still runs it healthy now, then
// writes that release into prod's stack config file - a reviewable diff, confirmed or --yes.
// It never touches prod's cluster: prod's rollout is an ordinary `molt rollout --stack prod`.
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync, mkdirSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InvalidConfigError, stackConfigPath, type StackConfig } from "../config";
import type { EdgeFactory } from "../edges/open";
import { inspect } from "../inspect";
import { backendUrl } from "../stack/engine";
import { projectDir, stackConfig } from "../run/context";
import { lineDiff, withRelease } from "./config-edit";
import { PromotionNotConfirmedError, PromotionRefusedError } from "./errors";
import type { PromoteEvent } from "./events";
import { releaseDigest, stackNameProblem, type Release } from "./release";
import {
  describeRelease,
  promotionTargetProblem,
  releaseIntentProblems,
  signatureDetail,
  verificationProblem,
  verificationWarning,
  type Trust,
} from "./rules";
import { declaredSource, readSourceRecord, type RecordSource } from "./source";

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
  const workDir = projectDir(o.workDir);
  for (const [flag, name] of [
    ["--from", o.from],
    ["--to", o.to],
  ] as const) {
    const p = stackNameProblem(name);
    if (p) throw new PromotionRefusedError(`${flag} ${name} is not a stack name: ${p}; nothing was changed`);
  }
  if (o.from === o.to) throw new PromotionRefusedError(`--from and --to are both ${o.from}; nothing was changed`);
  const source = stackConfig(workDir, o.from);
  const release = source.release;
  if (!release)
    throw new PromotionRefusedError(
      `stack ${o.from} names no molt:release: there is nothing to promote; nothing was changed`,
    );
  const targetProblem = promotionTargetProblem(release, o.from, o.to);
  if (targetProblem) throw new PromotionRefusedError(`${targetProblem}; nothing was changed`);
  // What the config names; what the cluster runs is said once it has been observed.
  check("release", `stack ${o.from}'s config names ${describeRelease(release)}`);

  // The record, in the source stack's backend, checked with the key the target trusts.
  const targetFile = stackConfigPath(workDir, o.to);
  if (!existsSync(targetFile))
    throw new PromotionRefusedError(
      `${targetFile} does not exist: create stack ${o.to}'s config (provider, replicas, its settings) first; ` +
        `promote writes only the release into it`,
    );
  const declared = declaredSource(workDir, o.to, o.from);
  const from: RecordSource = o.fromBackend
    ? { url: o.fromBackend, origin: "--from-backend" }
    : declared?.backend
      ? { url: declared.backend, origin: `molt:promotion.requireVerifiedOn in ${targetFile}` }
      : o.env?.PULUMI_BACKEND_URL
        ? { url: o.env.PULUMI_BACKEND_URL, origin: "PULUMI_BACKEND_URL" }
        : { url: backendUrl(), origin: process.env.PULUMI_BACKEND_URL ? "PULUMI_BACKEND_URL" : "the default backend" };
  const trust: Trust = {
    ...(declared?.publicKey ? { publicKey: declared.publicKey } : {}),
    soakMinutes: source.promotion.soakMinutes,
  };
  let problem: string | undefined;
  try {
    const stored = await readSourceRecord(from, o.from, release.name, o.env);
    problem = verificationProblem(stored?.record, release, o.from, trust);
    if (!problem) {
      const r = stored!.record;
      const warning = verificationWarning(r, o.from, trust);
      if (warning) emit({ type: "warning", message: warning });
      check(
        "verified",
        `${o.from} converged on ${release.name} at ${r.converged.at} ` +
          `(${r.converged.operations} operation(s), none failed) and stayed healthy for ${r.soak.minutes} min ` +
          `(${r.soak.observations} observations, until ${r.soak.passedAt}); ${signatureDetail(r, trust)}`,
      );
    }
  } catch (e) {
    problem = (e as Error).message;
  }
  if (problem) throw new PromotionRefusedError(`promotion of ${release.name} refused: ${problem}; nothing was changed`);

  // Still healthy now: the source observed once more, every condition true, nothing to do.
  const now = await inspect({
    stack: o.from,
    workDir,
    env: { ...(o.env ?? {}), PULUMI_BACKEND_URL: from.url },
    ...(o.edges ? { edges: o.edges } : {}),
  });
  const image = release.images[o.from];
  const runs = clusterRuns(o.from, now.nodes);
  const offRelease = now.nodes.some(
    (n) =>
      n.image !== image ||
      (release.kubernetesVersion !== undefined && n.kubernetesVersion !== release.kubernetesVersion),
  );
  const unhealthy = [
    ...(now.nodes.length === 0 || offRelease
      ? [`${runs}${now.nodes.length ? `, not release ${release.name}'s image for ${o.from} (${image})` : ""}`]
      : []),
    ...now.conditions.filter((c) => c.status !== "True").map((c) => `${c.type}: ${c.reason}`),
    ...(now.next.kind !== "done" ? [`next operation ${now.next.kind}: ${now.next.reason}`] : []),
  ];
  if (unhealthy.length)
    throw new PromotionRefusedError(
      `promotion of ${release.name} refused: stack ${o.from} is not healthy on it now; nothing was changed:\n` +
        unhealthy.map((u) => `  - ${u}`).join("\n"),
    );
  check("healthy-now", `${runs}: release ${release.name}, every condition True, nothing to do`);

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

/** What `stack`'s cluster runs, from one observation: "staging's cluster runs lab-v2 on 3 nodes (a, b, c)". */
function clusterRuns(stack: string, nodes: { name: string; image: string; kubernetesVersion?: string }[]): string {
  if (nodes.length === 0) return `${stack}'s cluster runs nothing: it has no nodes`;
  const groups = new Map<string, string[]>();
  for (const n of nodes) {
    const what = n.kubernetesVersion ? `${n.image} (Kubernetes ${n.kubernetesVersion})` : n.image;
    groups.set(what, [...(groups.get(what) ?? []), n.name]);
  }
  const parts = [...groups].map(
    ([what, names]) => `${what} on ${names.length} node${names.length === 1 ? "" : "s"} (${names.join(", ")})`,
  );
  return `${stack}'s cluster runs ${parts.join(" and ")}`;
}

/** Loads `text` as stack `stack`'s config, exactly as a rollout would, without writing the real file. */
function validateText(text: string, stack: string, file: string): StackConfig {
  const dir = mkdtempSync(join(tmpdir(), "molt-promote-"));
  try {
    mkdirSync(join(dir, "stacks"));
    writeFileSync(stackConfigPath(dir, stack), text);
    return stackConfig(dir, stack);
  } catch (e) {
    if (e instanceof InvalidConfigError) throw new InvalidConfigError(file + " (after promotion)", e.problems);
    throw e;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
