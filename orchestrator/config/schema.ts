// The schema of the keys every stack has, and the rules that span keys: a stack file's
// first check (orchestrator/config/index.ts loads it; each provider's sections come from its definition).
import { publicKeyBlob } from "../../infra/remote/ssh";
import * as semver from "semver";
import { z } from "zod";
import { cloudCommonSections, SET_PRIVATE_KEY } from "../../infra/providers/cloud-config";
import { PROVIDER_KINDS, PROVIDERS } from "../../infra/providers/registry";
import type { HookName } from "../core/model";
import { windowSchema } from "../controls/window";
import { HOOK_NAMES, hookSchema } from "../controls/hook-config";

export const isPublicKey = (v: string) => {
  try {
    publicKeyBlob(v);
    return true;
  } catch {
    return false;
  }
};

export const unixUser = z.string().regex(/^[a-z_][a-z0-9_-]*$/, "a Unix user name");

/** molt:ssh.bastion: the jump host every SSH connection goes through (KubeOne's bastion). */
export const bastionSchema = z
  .object(
    {
      host: z
        .string({ message: "a host name or address" })
        .regex(/^[A-Za-z0-9]([A-Za-z0-9.:-]*[A-Za-z0-9])?$/, "a host name or address"),
      port: z.number().int().min(1).max(65535).optional(),
      user: unixUser.optional(),
      hostKey: z
        .string({ message: 'the host\'s public key as in known_hosts, such as "ssh-ed25519 AAAA..."' })
        .refine(isPublicKey, 'an SSH public key line such as "ssh-ed25519 AAAA..." (ssh-keyscan prints it)'),
      agent: z.boolean().optional(),
    },
    { message: "{ host, hostKey, port?, user?, agent? }: the jump host molt connects through" },
  )
  .strict();

/**
 * molt:kubernetesVersion: "1.37.2", or "v1.37.2" as kubeadm-config and `kubectl version` write
 * it. Normalised here, once, to the form without the "v": everything after the stack file
 * (node entries, status, events, verification records, the comparisons that decide what is
 * outdated) sees one spelling. Anything else semver would let through (a second "v",
 * spaces, build metadata) is refused rather than guessed at.
 */
export const KUBERNETES_VERSION = /^v?(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)$/;
export const kubernetesVersionSchema = z
  .string({ message: "a full version such as 1.34.2" })
  .refine(
    (v) => KUBERNETES_VERSION.test(v) && semver.valid(v.replace(/^v/, "")) !== null,
    'a full version such as 1.34.2 (or v1.34.2); no spaces, build metadata ("+...") or second "v"',
  )
  .transform((v) => v.replace(/^v/, ""));

/**
 * molt:images (orchestrator/config/images.ts): Kubernetes minors ("1.36") to the image of that
 * minor as the provider names it, or (clouds) { image, kubernetesVersion }.
 */
export const imagesSchema = z
  .record(
    z.string().regex(/^\d+\.\d+$/, 'a Kubernetes minor such as "1.36" as the key'),
    z.union(
      [
        z.string().min(1, "an image name"),
        z
          .object({
            image: z.string({ message: "the image of this minor" }).min(1, "an image name"),
            kubernetesVersion: kubernetesVersionSchema,
          })
          .strict(),
      ],
      { message: "an image, or { image, kubernetesVersion } (clouds)" },
    ),
    {
      message:
        'a map of Kubernetes minors to images, such as { "1.36": <image of 1.36>, "1.37": <image of 1.37> }: ' +
        "the images a chained upgrade rolls through",
    },
  )
  .refine((m) => Object.keys(m).length > 0, "at least one minor (or remove the key)");

export type ImagesSection = z.infer<typeof imagesSchema>;

export const baseSections = {
  "molt:provider": z.enum(PROVIDER_KINDS, { message: `one of ${PROVIDER_KINDS.join(", ")}` }),
  // Pulumi rewrites top-level values of the stack file as strings ("3").
  "molt:replicas": z.preprocess(
    (v) => (typeof v === "string" && /^\d+$/.test(v) ? Number(v) : v),
    z
      .number({ message: "a number" })
      .int("a whole number")
      .min(1, "at least 1")
      .max(9, "at most 9")
      .refine((n) => n % 2 === 1, "an odd number (stacked etcd: an even count adds no fault tolerance)"),
  ),
  "molt:image": z.string().min(1, "the base image: a lab image, AMI, Azure image reference or vSphere template"),
  "molt:kubernetesVersion": kubernetesVersionSchema.optional(),
  "molt:images": imagesSchema.optional(),
  "molt:encryptionAtRest": z
    .boolean({
      message:
        "true: a new cluster's Secrets are encrypted in etcd (aescbc, a key made on the first node, carried to " +
        "each new node); false or absent: not",
    })
    .optional(),
  "molt:rollout": z
    .object({
      maxSurge: z.union([z.literal(0), z.literal(1)], { message: "0 or 1" }).optional(),
      maxUnavailable: z
        .literal(0, { message: "0: molt never takes a member away before its replacement is healthy" })
        .optional(),
      onFailure: z.enum(["rollback", "pause"]).optional(),
      maxAppliedLag: z.number().int().min(0).optional(),
      soakSeconds: z
        .number({ message: "seconds a healthy new node is observed before the next retirement" })
        .int("a whole number of seconds")
        .min(0, "0 (no soak) or more")
        .max(86400, "at most 86400 (a day)")
        .optional(),
      stepSoakSeconds: z
        .number({ message: "seconds a chained upgrade's converged step is observed before the next step starts" })
        .int("a whole number of seconds")
        .min(0, "0 (no soak) or more")
        .max(86400, "at most 86400 (a day)")
        .optional(),
      replaceCertificatesExpiringWithinDays: z
        .number({ message: "days: a node whose certificates expire within them is replaced" })
        .int("a whole number of days")
        .min(1, "at least 1")
        .max(3650, "at most 3650")
        .optional(),
      window: windowSchema.optional(),
      pruneWithNextSurge: z
        .boolean({ message: "true or false: destroy a retired node and create the next in one engine run" })
        .optional(),
    })
    .strict()
    .optional(),
  "molt:hooks": z
    .object(
      Object.fromEntries(HOOK_NAMES.map((h) => [h, hookSchema.optional()])) as Record<
        HookName,
        z.ZodOptional<typeof hookSchema>
      >,
      { message: `a map of hooks (${HOOK_NAMES.join(", ")}) to { command, timeoutSeconds? }` },
    )
    .strict()
    .optional(),
  "molt:notify": z
    .object(
      {
        includeHookOutput: z
          .boolean({
            message:
              "true or false: whether a failed hook's output (redacted) goes to --notify webhooks and into the " +
              "run's reasons",
          })
          .optional(),
      },
      { message: "{ includeHookOutput? }: what --notify webhooks hear (the URL itself is given with --notify)" },
    )
    .strict()
    .optional(),
  "molt:timeouts": z
    .object({
      joinSeconds: z.number().int().min(10).max(7200).optional(),
      settleSeconds: z.number().int().min(1).max(3600).optional(),
      drainSeconds: z.number().int().min(1).max(86400).optional(),
      lockSeconds: z.number().int().min(10).max(600).optional(),
    })
    .strict()
    .optional(),
  "molt:lock": z
    .object(
      {
        in: z
          .enum(["backend", "cluster"], {
            message:
              '"backend" (a lease beside the state: file://, s3://, azblob://) or "cluster" (a lease in the ' +
              "cluster's etcd, for backends molt cannot write to: Pulumi Cloud, gs://)",
          })
          .optional(),
      },
      { message: '{ in: "backend" | "cluster" }: where the stack\'s rollout lease lives' },
    )
    .strict()
    .optional(),
  "molt:backups": z
    .object({
      keep: z
        .number({ message: "a number of etcd backups per stack to keep" })
        .int("a whole number")
        .min(1, "at least 1 (the backup a run takes is always kept)")
        .max(1000, "at most 1000")
        .optional(),
    })
    .strict()
    .optional(),
  "molt:ssh": z
    .object({
      user: unixUser.optional(),
      port: z.number().int().min(1).max(65535).optional(),
      // Offer the keys of the ssh-agent at $SSH_AUTH_SOCK too (KubeOne's ssh_agent_socket).
      agent: z.boolean().optional(),
      bastion: bastionSchema.optional(),
      // Written by `pulumi config set --secret --path`, as { secure: <ciphertext> }.
      privateKey: z
        .object(
          { secure: z.string().min(1) },
          { message: `a Pulumi secret, never the key in plain text: ${SET_PRIVATE_KEY}` },
        )
        .strict()
        .optional(),
    })
    .strict()
    .optional(),
} as const;

/** Every section a provider owns: those of other providers are refused on clouds. */
export const PROVIDER_SECTION_KEYS = [...new Set(PROVIDERS.flatMap((p) => Object.keys(p.sections)))];

export const KNOWN_KEYS = [
  ...Object.keys(baseSections),
  ...Object.keys(cloudCommonSections).filter((k) => !(k in baseSections)),
  ...PROVIDER_SECTION_KEYS,
  "molt:apiEndpoint",
  "molt:release",
  "molt:promotion",
];

/**
 * With molt:provider missing or unknown, every provider section present is still checked
 * (as optional), so all problems show at once.
 */
export function everySectionPresent(raw: Record<string, unknown>): Record<string, z.ZodType> {
  const shape: Record<string, z.ZodType> = {};
  for (const p of PROVIDERS)
    for (const [key, schema] of Object.entries(p.sections)) if (raw[key] !== undefined) shape[key] = schema;
  return shape;
}

/** Rules that span keys, on raw values (so they are reported even when other keys are invalid). */
export function crossFieldProblems(raw: Record<string, unknown>): string[] {
  const problems: string[] = [];
  const replicas = typeof raw["molt:replicas"] === "string" ? Number(raw["molt:replicas"]) : raw["molt:replicas"];
  const rolloutRaw = raw["molt:rollout"] as { maxSurge?: unknown; pruneWithNextSurge?: unknown } | undefined;
  if (rolloutRaw?.maxSurge === 0 && rolloutRaw.pruneWithNextSurge === true) {
    problems.push(
      `molt:rollout.pruneWithNextSurge: true creates the next node before the retired one is destroyed, one ` +
        `machine beyond replicas, which maxSurge: 0 rules out; drop one of the two`,
    );
  }
  if (rolloutRaw?.maxSurge === 0 && typeof replicas === "number" && replicas < 3) {
    problems.push(
      `molt:rollout.maxSurge: 0 (retire first) needs at least 3 replicas, or the cluster would lose quorum; use ` +
        `maxSurge 1`,
    );
  }
  // A misspelt molt: key would otherwise be ignored silently.
  for (const key of Object.keys(raw)) {
    if (key.startsWith("molt:") && !KNOWN_KEYS.includes(key) && key !== "molt:sshUser") {
      problems.push(`${key}: not a molt setting (known: ${KNOWN_KEYS.join(", ")})`);
    }
  }
  return problems;
}

export function describeIssue(i: z.core.$ZodIssue): string {
  return (
    `${i.path.join(".") || "config"}: ` +
    `${i.message}${"input" in i && i.input !== undefined ? ` (got ${JSON.stringify(i.input)})` : ""}`
  );
}

// ---- cloud sections (molt:ssh, molt:failureDomains, molt:bootstrap and the provider's own) ----
// Checked for cloud providers only; lab stacks pass them through as before.
