// A release: what a rollout converges to - Kubernetes version, etcd version and the base
// image as each environment names it (an AMI copied to another account has another ID) -
// declared in stack config as molt:release, and the promotion settings (molt:promotion).
// Validated here with the other keys (orchestrator/config/index.ts calls in); the digest is what
// a verification record carries, so a record can only vouch for exactly this release.
import { createHash } from "node:crypto";
import * as semver from "semver";
import { z } from "zod";
import { STORE_SCHEMES, STORE_URL } from "../backend/schemes";
import { parsePublicKey } from "./signing";

/** One minor of a release's chain: its version (clouds need it) and its image per stack. */
export interface ReleaseStep {
  kubernetesVersion?: string;
  images: Record<string, string>;
}

export interface Release {
  name: string;
  kubernetesVersion?: string;
  etcdVersion?: string;
  /** The base image per stack name, as that stack's provider names it. */
  images: Record<string, string>;
  /**
   * A chained upgrade's steps (molt:images): per Kubernetes minor on the way, the image per
   * stack. A stack that names the release writes the same in its molt:images (molt promote does).
   */
  chain?: Record<string, ReleaseStep>;
}

/**
 * A stack whose verification a rollout requires, the backend its records live in (default:
 * this stack's), and the public key its records must be signed with (none: unsigned records
 * are accepted, with a warning).
 */
export interface VerificationSource {
  stack: string;
  backend?: string;
  /** The ed25519 public key, base64 of its DER (normalised from PEM or base64). */
  publicKey?: string;
}

export interface PromotionSettings {
  /** How long the cluster must stay healthy after convergence before the release counts as verified. */
  soakMinutes: number;
  requireVerifiedOn: VerificationSource[];
}

export const DEFAULT_SOAK_MINUTES = 30;

const STACK_NAME = /^[A-Za-z0-9_.-]+$/;

/** Why `name` cannot name a stack (stacks/Pulumi.<name>.yaml, a record's folder), or undefined. */
export function stackNameProblem(name: string): string | undefined {
  if (!STACK_NAME.test(name) || /^\.+$/.test(name))
    return "a stack name has letters, digits, '-', '_' and '.' only (its config is stacks/Pulumi.<name>.yaml)";
  return undefined;
}
const fullVersion = (what: string) =>
  z
    .string({ message: `a full ${what} version such as ${what === "Kubernetes" ? "1.37.2" : "3.6.16"}` })
    .refine((v) => semver.valid(v.replace(/^v/, "")) !== null, `a full ${what} version (major.minor.patch)`);

export const releaseSchema = z
  .object(
    {
      name: z
        .string({ message: "the release's name, such as k8s-1.37.2-os-2026-11" })
        .regex(
          /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/,
          "letters, digits, '.', '_' and '-' (at most 100; it names the release's record in the backend)",
        ),
      kubernetesVersion: fullVersion("Kubernetes").optional(),
      etcdVersion: fullVersion("etcd").optional(),
      images: z
        .record(
          z.string().regex(STACK_NAME, "a stack name (letters, digits, '-', '_', '.')"),
          z.string({ message: "the base image as that stack names it" }).min(1, "the base image, not empty"),
          { message: "the base image per stack, such as { staging: ami-0aaa, prod: ami-0bbb }" },
        )
        .refine((m) => Object.keys(m).length > 0, "at least this stack's image"),
      chain: z
        .record(
          z.string().regex(/^\d+\.\d+$/, 'a Kubernetes minor such as "1.36"'),
          z
            .object(
              {
                kubernetesVersion: fullVersion("Kubernetes").optional(),
                images: z.record(
                  z.string().regex(STACK_NAME, "a stack name (letters, digits, '-', '_', '.')"),
                  z.string({ message: "that minor's image as the stack names it" }).min(1, "the image, not empty"),
                  { message: "the image of this minor per stack, such as { staging: ami-0aaa, prod: ami-0bbb }" },
                ),
              },
              { message: "{ kubernetesVersion?, images: { <stack>: <image> } }" },
            )
            .strict(),
          {
            message:
              'the chain\'s steps per Kubernetes minor, such as { "1.36": { kubernetesVersion: 1.36.3, images: ' +
              "{ staging: ami-0aaa, prod: ami-0bbb } } }",
          },
        )
        .refine((m) => Object.keys(m).length > 0, "at least one minor, or remove the key")
        .optional(),
    },
    { message: "{ name, images: { <stack>: <image> }, kubernetesVersion?, etcdVersion?, chain? }" },
  )
  .strict();

const sourceSchema = z.union(
  [
    z.string().regex(STACK_NAME, "a stack name (letters, digits, '-', '_', '.')"),
    z
      .object({
        stack: z.string().regex(STACK_NAME, "a stack name (letters, digits, '-', '_', '.')"),
        backend: z
          .string({ message: "the source stack's backend URL" })
          .regex(
            STORE_URL,
            `a ${STORE_SCHEMES.replace(" and ", " or ")} backend URL ` +
              "(molt reads verification records from those backends only)",
          )
          .optional(),
        publicKey: z
          .string({ message: "the ed25519 public key its records are signed with (molt keygen prints it)" })
          .superRefine((v, ctx) => {
            try {
              parsePublicKey(v, "it");
            } catch (e) {
              ctx.addIssue({ code: "custom", message: (e as Error).message });
            }
          })
          .transform((v) => parsePublicKey(v, "it").base64)
          .optional(),
      })
      .strict(),
  ],
  { message: "a stack name, or { stack, backend?, publicKey? } (its backend, the key its records are signed with)" },
);

export const promotionSchema = z
  .object({
    soakMinutes: z
      .number({ message: "minutes the cluster must stay healthy after convergence (fractions allowed, e.g. 0.5)" })
      .min(0, "0 or more")
      .max(10080, "at most 10080 (a week)")
      .optional(),
    requireVerifiedOn: z
      .array(sourceSchema, { message: "a list of stacks, such as [staging]" })
      .min(1, "at least one stack, or remove the key")
      .optional(),
  })
  .strict();

/** Is a refused value (or what it holds) a key's text, never to be quoted back? */
function holdsKey(path: PropertyKey[], input: unknown): boolean {
  return path.includes("publicKey") || (typeof input === "object" && input !== null && "publicKey" in input);
}

/** Normalised: no "v" prefix, images sorted, so equal releases have equal digests. */
function canonical(r: Release): Release {
  return {
    name: r.name,
    ...(r.kubernetesVersion ? { kubernetesVersion: r.kubernetesVersion.replace(/^v/, "") } : {}),
    ...(r.etcdVersion ? { etcdVersion: r.etcdVersion.replace(/^v/, "") } : {}),
    images: sortedKeys(r.images),
    ...(r.chain
      ? {
          chain: Object.fromEntries(
            Object.entries(r.chain)
              .sort(([a], [b]) => a.localeCompare(b, undefined, { numeric: true }))
              .map(([minor, st]) => [
                minor,
                {
                  ...(st.kubernetesVersion ? { kubernetesVersion: st.kubernetesVersion.replace(/^v/, "") } : {}),
                  images: sortedKeys(st.images),
                },
              ]),
          ),
        }
      : {}),
  };
}

const sortedKeys = (m: Record<string, string>) =>
  Object.fromEntries(Object.entries(m).sort(([a], [b]) => a.localeCompare(b)));

/** sha256 over the release's canonical JSON: equal for the same release, whatever the key order. */
export function releaseDigest(r: Release): string {
  return (
    "sha256:" +
    createHash("sha256")
      .update(JSON.stringify(canonical(r)))
      .digest("hex")
  );
}

/**
 * molt:release and molt:promotion of stack `stack`, validated; problems are added to
 * `problems` with their key. `image`/`kubernetesVersion`: the raw molt:image and
 * molt:kubernetesVersion, which the release must agree with.
 */
export function resolvePromotion(
  raw: Record<string, unknown>,
  stack: string,
  problems: string[],
): { release?: Release; promotion: PromotionSettings } {
  // A key's text is never quoted back (it may be a private key pasted where the public one belongs).
  const describe = (key: string, r: z.ZodSafeParseError<unknown>) =>
    r.error.issues.map(
      (i) =>
        `${[key, ...i.path].join(".")}: ${i.message}` +
        ("input" in i && i.input !== undefined && !holdsKey(i.path, i.input)
          ? ` (got ${JSON.stringify(i.input)})`
          : ""),
    );
  let release: Release | undefined;
  if (raw["molt:release"] !== undefined) {
    const r = releaseSchema.safeParse(raw["molt:release"], { reportInput: true });
    if (!r.success) problems.push(...describe("molt:release", r));
    else {
      release = canonical(r.data);
      const mine = release.images[stack];
      if (mine === undefined)
        problems.push(
          `molt:release.images: no image for this stack (${stack}); add "${stack}: <image>" ` +
            `(have: ${Object.keys(release.images).join(", ")})`,
        );
      else if (typeof raw["molt:image"] === "string" && raw["molt:image"] !== mine)
        problems.push(
          `molt:image: ${raw["molt:image"]} is not release ${release.name}'s image for stack ${stack} (${mine}); ` +
            `write the same image in both (molt promote does)`,
        );
      problems.push(...releaseChainProblems(release, stack, raw["molt:images"]));
      const k = raw["molt:kubernetesVersion"];
      if (typeof k === "string" && release.kubernetesVersion && k.replace(/^v/, "") !== release.kubernetesVersion)
        problems.push(
          `molt:kubernetesVersion: ${k} is not release ${release.name}'s Kubernetes version ` +
            `(${release.kubernetesVersion}); write the same version in both`,
        );
    }
  }
  let promotion: PromotionSettings = { soakMinutes: DEFAULT_SOAK_MINUTES, requireVerifiedOn: [] };
  if (raw["molt:promotion"] !== undefined) {
    const r = promotionSchema.safeParse(raw["molt:promotion"], { reportInput: true });
    if (!r.success) problems.push(...describe("molt:promotion", r));
    else {
      const sources = (r.data.requireVerifiedOn ?? []).map((s) => (typeof s === "string" ? { stack: s } : s));
      const seen = new Set<string>();
      for (const s of sources) {
        if (s.stack === stack)
          problems.push(
            `molt:promotion.requireVerifiedOn: ${stack} is this stack; name the stacks a release must pass first`,
          );
        if (seen.has(s.stack)) problems.push(`molt:promotion.requireVerifiedOn: ${s.stack} is named twice`);
        seen.add(s.stack);
      }
      promotion = { soakMinutes: r.data.soakMinutes ?? DEFAULT_SOAK_MINUTES, requireVerifiedOn: sources };
    }
  }
  return { ...(release ? { release } : {}), promotion };
}

/**
 * molt:release.chain against this stack's molt:images: every minor the release names an
 * image of for this stack is in molt:images with that image, and molt:images names no other.
 */
function releaseChainProblems(release: Release, stack: string, rawImages: unknown): string[] {
  const mine = Object.entries(release.chain ?? {}).flatMap(([minor, st]) =>
    st.images[stack] !== undefined ? [[minor, st.images[stack], st.kubernetesVersion] as const] : [],
  );
  const written = new Map(
    Object.entries(typeof rawImages === "object" && rawImages !== null ? rawImages : {}).map(([minor, v]) => [
      minor,
      typeof v === "string"
        ? { image: v as unknown, version: undefined as unknown }
        : {
            image: (v as { image?: unknown } | null)?.image,
            version: (v as { kubernetesVersion?: unknown } | null)?.kubernetesVersion,
          },
    ]),
  );
  const problems: string[] = [];
  for (const [minor, image, version] of mine) {
    const have = written.get(minor);
    if (have?.image !== image)
      problems.push(
        `molt:images."${minor}": ${have === undefined ? "missing" : String(have.image)}, but release ` +
          `${release.name}'s chain names ${image} for stack ${stack} at ${minor}; write the same image in both ` +
          `(molt promote does)`,
      );
    else if (version !== undefined && typeof have.version === "string" && have.version.replace(/^v/, "") !== version)
      problems.push(
        `molt:images."${minor}".kubernetesVersion: ${have.version}, but release ${release.name}'s chain names ` +
          `${version} at ${minor}; write the same version in both`,
      );
  }
  for (const minor of written.keys())
    if (!mine.some(([m]) => m === minor))
      problems.push(
        `molt:images."${minor}": release ${release.name}'s chain names no ${minor} image for stack ${stack} ` +
          `(molt:release.chain."${minor}".images.${stack}); add it there or remove it here`,
      );
  return problems;
}
