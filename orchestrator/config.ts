// User intent from stacks/Pulumi.<stack>.yaml, validated with a schema. Every bad value
// is reported with its key, what was wrong and what to write instead; nothing runs before
// the whole file is valid. The keys every stack has are checked here; each provider's own
// sections, image rules and failure domains come from its definition
// (infra/providers/registry.ts).
import { publicKeyBlob } from "../infra/remote/ssh";
import type { SshAccessSettings } from "../infra/remote/access";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import * as semver from "semver";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { readLabImage } from "../infra/lab/image";
import type { LabSettings } from "../infra/lab/node";
import { InvalidBootstrapSettingError, kubernetesVersion, validateSettings } from "../infra/kubeadm/settings";
import { cloudCommonSections, SET_PRIVATE_KEY, type CloudCommonSections } from "../infra/providers/cloud-config";
import {
  cloudConfigOf,
  PROVIDER_KINDS,
  PROVIDERS,
  providerOf,
  type AnyCloudProvider,
  type CloudConfig,
} from "../infra/providers/registry";
import type { VipSettings } from "../infra/vip/keepalived";
import type { VsphereNodeSettings } from "../infra/providers/vsphere/config";
import { checkStaticAddresses, resolveApiEndpoint } from "./config-endpoint";
import { resolvePromotion, type PromotionSettings, type Release } from "./promotion/release";
import type { HookName, Intent } from "./model";
import { windowSchema, type MaintenanceWindow } from "./controls/window";
import { DEFAULT_HOOK_TIMEOUT_SECONDS, HOOK_NAMES, hookSchema } from "./controls/hook-config";

export type { CloudConfig };

export class InvalidConfigError extends Error {
  constructor(
    readonly file: string,
    readonly problems: string[],
  ) {
    super(`invalid configuration in ${file}; nothing was changed:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "InvalidConfigError";
  }
}

const isPublicKey = (v: string) => {
  try {
    publicKeyBlob(v);
    return true;
  } catch {
    return false;
  }
};
const unixUser = z.string().regex(/^[a-z_][a-z0-9_-]*$/, "a Unix user name");
/** molt:ssh.bastion: the jump host every SSH connection goes through (KubeOne's bastion). */
const bastionSchema = z
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

const baseSections = {
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
  "molt:kubernetesVersion": z
    .string()
    .refine((v) => semver.valid(v.replace(/^v/, "")) !== null, "a full version such as 1.34.2")
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
      replaceCertificatesExpiringWithinDays: z
        .number({ message: "days: a node whose certificates expire within them is replaced" })
        .int("a whole number of days")
        .min(1, "at least 1")
        .max(3650, "at most 3650")
        .optional(),
      window: windowSchema.optional(),
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
  "molt:timeouts": z
    .object({
      joinSeconds: z.number().int().min(10).max(7200).optional(),
      settleSeconds: z.number().int().min(1).max(3600).optional(),
      drainSeconds: z.number().int().min(1).max(86400).optional(),
      lockSeconds: z.number().int().min(10).max(600).optional(),
    })
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

/** How molt reaches every node over SSH, besides the stack's own key (molt:ssh). */
export type SshAccess = SshAccessSettings;

export interface StackConfig {
  intent: Intent;
  sshUser: string;
  /** molt:ssh.agent and molt:ssh.bastion. */
  sshAccess: SshAccess;
  /** The lab's settings: present exactly when the provider is lab. */
  lab?: LabSettings;
  /** A cloud's settings: present exactly when the provider is a cloud (not lab). */
  cloud?: CloudConfig;
  /** etcd backups (orchestrator/etcd-backup.ts): how many per stack stay in ~/.molt/snapshots. */
  backups: { keep: number };
  /** The rollout lease's time to live: a lease not renewed for this long is free (molt:timeouts.lockSeconds). */
  lockSeconds: number;
  /** molt:apiEndpoint mode vip: keepalived on the control-plane nodes (lab, vsphere); absent: a load balancer. */
  apiEndpoint?: VipSettings;
  /** molt:release: what this stack's rollout converges to (orchestrator/promotion/). */
  release?: Release;
  /** molt:promotion: the soak and the stacks a release must have been verified on first. */
  promotion: PromotionSettings;
  file: string;
}

export function stackConfigPath(workDir: string, stack: string): string {
  return join(workDir, "stacks", `Pulumi.${stack}.yaml`);
}

export function loadStackConfig(workDir: string, stack: string): StackConfig {
  if (!/^[A-Za-z0-9_.-]+$/.test(stack))
    throw new InvalidConfigError(`--stack ${stack}`, [
      `stack name "${stack}" may only contain letters, digits, '-', '_' and '.'`,
    ]);
  const file = stackConfigPath(workDir, stack);
  if (!existsSync(file)) {
    throw new InvalidConfigError(file, [
      `no such file: create ${file} with at least molt:provider, molt:replicas and molt:image (see stacks/Pulumi.lab.yaml)`,
    ]);
  }
  let doc: unknown;
  try {
    doc = parseYaml(readFileSync(file, "utf8"));
  } catch (e) {
    throw new InvalidConfigError(file, [`not valid YAML: ${(e as Error).message}`]);
  }
  const config = (doc as { config?: unknown } | null)?.config;
  if (!config || typeof config !== "object") throw new InvalidConfigError(file, ["it has no `config:` map"]);
  const raw = config as Record<string, unknown>;
  const def = providerOf(raw["molt:provider"]);
  // reportInput: errors quote the value that was given.
  const r = z
    .object({ ...baseSections, ...(def?.family === "lab" ? def.sections : def ? {} : everySectionPresent(raw)) })
    .passthrough()
    .safeParse(config, { reportInput: true });
  // Rules across keys are checked on the raw values too, so every problem is reported at once.
  const crossProblems = [...crossFieldProblems(raw), ...(def?.family === "lab" ? def.problems(raw, stack) : [])];
  const { release, promotion } = resolvePromotion(raw, stack, crossProblems);
  const cloudSections = def?.family === "cloud" ? parseCloudSections(def, config) : undefined;
  if (!r.success || cloudSections?.ok === false) {
    const issues = r.success ? [] : r.error.issues;
    // A key both schemas refuse is reported once, with the general schema's message.
    const reported = new Set(issues.map((i) => i.path.join(".")));
    const cloudIssues =
      cloudSections?.ok === false ? cloudSections.issues.filter((i) => !reported.has(i.path.join("."))) : [];
    throw new InvalidConfigError(file, [...[...issues, ...cloudIssues].map(describeIssue), ...crossProblems]);
  }
  const c = r.data as z.infer<z.ZodObject<typeof baseSections>> & Record<string, unknown>;
  const problems: string[] = [...crossProblems];
  const parsedCloud =
    def?.family === "cloud" && cloudSections?.ok ? cloudConfig(def, cloudSections.sections, raw, problems) : undefined;
  const labSettings = def?.family === "lab" ? def.settings(c, stack) : undefined;
  // vSphere static addresses (molt:vsphere.staticAddresses) and the API endpoint VIP (molt:apiEndpoint).
  const vsphere = (parsedCloud as { vsphere?: VsphereNodeSettings } | undefined)?.vsphere;
  const staticAddressPool = vsphere?.staticAddresses
    ? checkStaticAddresses(vsphere.staticAddresses, Number(raw["molt:replicas"]), problems)
    : [];
  const apiEndpoint = resolveApiEndpoint(raw["molt:apiEndpoint"], String(raw["molt:provider"]), problems, {
    ...(labSettings ? { lab: { name: labSettings.lab, subnet: labSettings.subnet } } : {}),
    ...(parsedCloud ? { controlPlaneEndpoint: parsedCloud.bootstrap.controlPlaneEndpoint } : {}),
    staticPool: staticAddressPool,
  });
  if (problems.length) throw new InvalidConfigError(file, problems);
  // The VIP reaches the vSphere nodes with their settings (infra/providers/vsphere/node.ts).
  const cloud =
    parsedCloud && vsphere && apiEndpoint
      ? ({ ...parsedCloud, vsphere: { ...vsphere, vip: apiEndpoint } } as CloudConfig)
      : parsedCloud;

  const sshUser = cloud?.ssh.user ?? c["molt:ssh"]?.user ?? "root";
  const bastion = c["molt:ssh"]?.bastion;
  return {
    file,
    sshUser,
    sshAccess: {
      agent: c["molt:ssh"]?.agent ?? false,
      ...(bastion
        ? {
            bastion: {
              host: bastion.host,
              port: bastion.port ?? 22,
              user: bastion.user ?? sshUser,
              hostKey: bastion.hostKey.trim(),
              agent: bastion.agent ?? false,
            },
          }
        : {}),
    },
    backups: { keep: c["molt:backups"]?.keep ?? DEFAULT_BACKUPS_KEPT },
    lockSeconds: c["molt:timeouts"]?.lockSeconds ?? 30,
    intent: {
      provider: c["molt:provider"],
      replicas: c["molt:replicas"],
      image: c["molt:image"],
      ...(c["molt:kubernetesVersion"] ? { kubernetesVersion: c["molt:kubernetesVersion"].replace(/^v/, "") } : {}),
      ...(cloud?.failureDomains.length ? { failureDomains: cloud.failureDomains } : {}),
      ...(staticAddressPool.length ? { staticAddressPool } : {}),
      ...(apiEndpoint ? { vip: { address: apiEndpoint.address } } : {}),
      rollout: {
        maxSurge: c["molt:rollout"]?.maxSurge ?? 1,
        onFailure: c["molt:rollout"]?.onFailure ?? "rollback",
        maxAppliedLag: c["molt:rollout"]?.maxAppliedLag ?? 1000,
        ...(c["molt:rollout"]?.replaceCertificatesExpiringWithinDays !== undefined
          ? { replaceCertificatesExpiringWithinDays: c["molt:rollout"].replaceCertificatesExpiringWithinDays }
          : {}),
        ...(c["molt:rollout"]?.window
          ? { window: { days: [], ...c["molt:rollout"].window } as MaintenanceWindow }
          : {}),
      },
      ...(c["molt:hooks"] && Object.keys(c["molt:hooks"]).length
        ? {
            hooks: Object.fromEntries(
              Object.entries(c["molt:hooks"]).map(([h, v]) => [
                h,
                { command: v!.command, timeoutSeconds: v!.timeoutSeconds ?? DEFAULT_HOOK_TIMEOUT_SECONDS },
              ]),
            ),
          }
        : {}),
      timeouts: {
        joinSeconds: c["molt:timeouts"]?.joinSeconds ?? 300,
        settleSeconds: c["molt:timeouts"]?.settleSeconds ?? 60,
        drainSeconds: c["molt:timeouts"]?.drainSeconds ?? 300,
        ...(c["molt:rollout"]?.soakSeconds ? { soakSeconds: c["molt:rollout"].soakSeconds } : {}),
      },
    },
    lab: labSettings ? { ...labSettings, ...(apiEndpoint ? { vip: apiEndpoint } : {}) } : undefined,
    ...(cloud ? { cloud } : {}),
    ...(apiEndpoint ? { apiEndpoint } : {}),
    ...(release ? { release } : {}),
    promotion,
  };
}

/**
 * Lab stacks: the image decides the Kubernetes and etcd versions (its image.json), like an
 * AMI built for one Kubernetes version. Checked before anything runs: a missing image or a
 * molt:kubernetesVersion the image does not carry is bad input, and nothing is changed.
 */
export function resolveLabImage(cfg: StackConfig): StackConfig {
  if (cfg.intent.provider !== "lab" || !cfg.lab) return cfg;
  const dir = join(cfg.lab.labRoot, "images");
  const meta = readLabImage(cfg.lab.labRoot, cfg.intent.image);
  if (!meta) {
    const have = existsSync(dir)
      ? readdirSync(dir).filter((f) => !f.startsWith(".") && existsSync(join(dir, f, "image.json")))
      : [];
    throw new InvalidConfigError(cfg.file, [
      `molt:image: lab image "${cfg.intent.image}" does not exist in ${dir} (have: ${have.join(", ") || "none"}); build images with tools/lab/build-images.sh`,
    ]);
  }
  const asked = cfg.intent.kubernetesVersion;
  const carried = meta.kubernetesVersion?.replace(/^v/, "");
  if (asked !== undefined && carried === undefined) {
    throw new InvalidConfigError(cfg.file, [
      `molt:kubernetesVersion: lab image "${meta.name}" runs etcd only, without Kubernetes; remove the key or use a k8s-* image`,
    ]);
  }
  if (asked !== undefined && asked !== carried) {
    throw new InvalidConfigError(cfg.file, [
      `molt:kubernetesVersion: ${asked} does not match lab image "${meta.name}", which carries Kubernetes ${carried}; remove the key (the image decides) or pick the image of ${asked}`,
    ]);
  }
  const { kubernetesVersion: _k, etcdVersion: _e, ...rest } = cfg.intent;
  return {
    ...cfg,
    intent: {
      ...rest,
      ...(carried ? { kubernetesVersion: carried } : {}),
      // etcd's rules (one minor at a time, the patch floors) apply to etcd-only images too.
      ...(meta.etcdVersion ? { etcdVersion: meta.etcdVersion.replace(/^v/, "") } : {}),
    },
  };
}

/** Every section a provider owns: those of other providers are refused on clouds. */
const PROVIDER_SECTION_KEYS = [...new Set(PROVIDERS.flatMap((p) => Object.keys(p.sections)))];

/** etcd backups kept per stack unless molt:backups.keep says otherwise. */
export const DEFAULT_BACKUPS_KEPT = 3;

const KNOWN_KEYS = [
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
function everySectionPresent(raw: Record<string, unknown>): Record<string, z.ZodType> {
  const shape: Record<string, z.ZodType> = {};
  for (const p of PROVIDERS)
    for (const [key, schema] of Object.entries(p.sections)) if (raw[key] !== undefined) shape[key] = schema;
  return shape;
}

/** Rules that span keys, on raw values (so they are reported even when other keys are invalid). */
function crossFieldProblems(raw: Record<string, unknown>): string[] {
  const problems: string[] = [];
  const replicas = typeof raw["molt:replicas"] === "string" ? Number(raw["molt:replicas"]) : raw["molt:replicas"];
  const rolloutRaw = raw["molt:rollout"] as { maxSurge?: unknown } | undefined;
  if (rolloutRaw?.maxSurge === 0 && typeof replicas === "number" && replicas < 3) {
    problems.push(
      `molt:rollout.maxSurge: 0 (retire first) needs at least 3 replicas, or the cluster would lose quorum; use maxSurge 1`,
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

function describeIssue(i: z.core.$ZodIssue): string {
  return `${i.path.join(".") || "config"}: ${i.message}${"input" in i && i.input !== undefined ? ` (got ${JSON.stringify(i.input)})` : ""}`;
}

// ---- cloud sections (molt:ssh, molt:failureDomains, molt:bootstrap and the provider's own) ----
// Checked for cloud providers only; lab stacks pass them through as before.

function parseCloudSections(
  def: AnyCloudProvider,
  config: unknown,
): { ok: true; sections: CloudCommonSections & Record<string, unknown> } | { ok: false; issues: z.core.$ZodIssue[] } {
  const r = z.object({ ...cloudCommonSections, ...def.sections }).safeParse(config);
  return r.success
    ? { ok: true, sections: r.data as CloudCommonSections & Record<string, unknown> }
    : { ok: false, issues: r.error.issues };
}

/** The typed settings of a cloud stack; what the schemas cannot see is added to `problems`. */
function cloudConfig(
  def: AnyCloudProvider,
  s: CloudCommonSections & Record<string, unknown>,
  raw: Record<string, unknown>,
  problems: string[],
): CloudConfig {
  const kind = def.kind;
  for (const key of PROVIDER_SECTION_KEYS) {
    if (raw[key] !== undefined && !(key in def.sections))
      problems.push(`${key}: not a setting of provider ${kind}; remove it`);
  }
  if (raw["molt:sshUser"] !== undefined) problems.push("molt:sshUser: not a key; write the user as molt:ssh.user");

  const version = raw["molt:kubernetesVersion"];
  if (typeof version !== "string") {
    problems.push(
      "molt:kubernetesVersion: required on clouds: the exact Kubernetes version kubeadm installs or verifies, such as 1.34.2",
    );
  } else {
    problemOf(problems, "molt:kubernetesVersion", () => kubernetesVersion(version));
  }
  const imageProblem = def.imageProblem(String(raw["molt:image"]));
  if (imageProblem) problems.push(`molt:image: ${imageProblem}`);

  const bootstrap = s["molt:bootstrap"];
  try {
    validateSettings(bootstrap);
  } catch (e) {
    if (!(e instanceof InvalidBootstrapSettingError)) throw e;
    problems.push(`molt:bootstrap.${e.setting}: ${e.message.slice(e.setting.length + 2)}`);
  }

  // The domains a machine can be placed in; molt:failureDomains defaults to all of them.
  const { known, where, unplacedAllowed } = def.domains(s);
  const failureDomains = s["molt:failureDomains"] ?? known;
  for (const d of failureDomains)
    if (!known.includes(d))
      problems.push(`molt:failureDomains: ${JSON.stringify(d)} is not in ${where} (${known.join(", ") || "none"})`);
  // Without a domain, a node gets the only placement there is; with several, it needs one.
  if (failureDomains.length === 0 && !unplacedAllowed) {
    problems.push(`molt:failureDomains: empty, but ${where} has ${known.join(", ")}; list the domains new nodes go to`);
  }

  const { user, port } = s["molt:ssh"];
  const cloud = cloudConfigOf(def, s, {
    ssh: { user, ...(port !== undefined ? { port } : {}) },
    failureDomains,
    bootstrap,
  });
  problems.push(...def.problems(cloud));
  return cloud;
}

/** Runs a check that throws; its message becomes a problem under `key`. */
function problemOf(problems: string[], key: string, check: () => unknown): void {
  try {
    check();
  } catch (e) {
    problems.push(
      `${key}: ${e instanceof InvalidBootstrapSettingError ? e.message.slice(e.setting.length + 2) : (e as Error).message}`,
    );
  }
}
