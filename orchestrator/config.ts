// User intent from stacks/Pulumi.<stack>.yaml, validated with a schema. Every bad value
// is reported with its key, what was wrong and what to write instead; nothing runs before
// the whole file is valid.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import * as semver from "semver";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { readLabImage } from "../infra/lab/image";
import type { LabSettings } from "../infra/lab/node";
import {
  InvalidBootstrapSettingError,
  kubernetesVersion,
  validateSettings,
  type KubeadmBootstrapSettings,
} from "../infra/kubeadm/settings";
import type { AwsNodeSettings } from "../infra/providers/aws";
import { imageReference, type AzureNodeSettings } from "../infra/providers/azure";
import type { VsphereNodeSettings } from "../infra/providers/vsphere";
import type { Intent } from "./model";

export class InvalidConfigError extends Error {
  constructor(
    readonly file: string,
    readonly problems: string[],
  ) {
    super(`invalid configuration in ${file}; nothing was changed:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "InvalidConfigError";
  }
}

const SET_PRIVATE_KEY =
  "`npm run pulumi -- config set --stack <stack> --secret --path 'molt:ssh.privateKey' < <key file>`";

const nameRe = /^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$/;

const labSchema = z
  .object({
    name: z.string().regex(nameRe, "a lowercase DNS label of at most 32 characters").optional(),
    root: z.string().startsWith("/", "an absolute path").optional(),
    bridge: z
      .string()
      .regex(/^[a-zA-Z0-9_-]{1,15}$/, "a Linux interface name of at most 15 characters")
      .optional(),
    subnet: z
      .string()
      .regex(/^\d+\.\d+\.\d+\.0\/24$/, "an IPv4 /24 such as 10.77.0.0/24")
      .refine(
        (v) =>
          v
            .split("/")[0]
            .split(".")
            .every((o) => Number(o) <= 255),
        "an IPv4 /24 such as 10.77.0.0/24 (octets 0-255)",
      )
      .optional(),
    lbPort: z.number().int().min(1).max(65535).optional(),
  })
  .strict();

const configSchema = z
  .object({
    "molt:provider": z.enum(["lab", "aws", "azure", "vsphere"], { message: "one of lab, aws, azure, vsphere" }),
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
      })
      .strict()
      .optional(),
    "molt:timeouts": z
      .object({
        joinSeconds: z.number().int().min(10).max(7200).optional(),
        settleSeconds: z.number().int().min(1).max(3600).optional(),
        drainSeconds: z.number().int().min(1).max(86400).optional(),
      })
      .strict()
      .optional(),
    "molt:ssh": z
      .object({
        user: z
          .string()
          .regex(/^[a-z_][a-z0-9_-]*$/, "a Unix user name")
          .optional(),
        port: z.number().int().min(1).max(65535).optional(),
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
    "molt:lab": labSchema.optional(),
  })
  .passthrough();

export interface StackConfig {
  intent: Intent;
  sshUser: string;
  /** The lab's settings: present exactly when the provider is lab. */
  lab?: LabSettings;
  /** A cloud's settings: present exactly when the provider is aws, azure or vsphere. */
  cloud?: CloudConfig;
  file: string;
}

export type CloudConfig = AwsCloudConfig | AzureCloudConfig | VsphereCloudConfig;

interface CloudConfigBase {
  /** The login user cloud-init creates (not root). The private key is the secret molt:ssh.privateKey, read by the program. */
  ssh: { user: string; port?: number };
  /** Where new nodes may go (molt:failureDomains); a node's domain is chosen once, when its entry is made. */
  failureDomains: string[];
  bootstrap: KubeadmBootstrapSettings;
}
export interface AwsCloudConfig extends CloudConfigBase {
  provider: "aws";
  aws: AwsNodeSettings;
}
export interface AzureCloudConfig extends CloudConfigBase {
  provider: "azure";
  azure: AzureNodeSettings;
}
export interface VsphereCloudConfig extends CloudConfigBase {
  provider: "vsphere";
  vsphere: VsphereNodeSettings;
  antiAffinity: { mandatory: boolean };
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
  // reportInput: errors quote the value that was given.
  const r = configSchema.safeParse(config, { reportInput: true });
  const raw = config as Record<string, unknown>;
  // Rules across keys are checked on the raw values too, so every problem is reported at once.
  const crossProblems = crossFieldProblems(raw, stack);
  const cloudSections = isCloudKind(raw["molt:provider"])
    ? parseCloudSections(raw["molt:provider"], config)
    : undefined;
  if (!r.success || cloudSections?.ok === false) {
    const issues = r.success ? [] : r.error.issues;
    // A key both schemas refuse is reported once, with the general schema's message.
    const reported = new Set(issues.map((i) => i.path.join(".")));
    const cloudIssues =
      cloudSections?.ok === false ? cloudSections.issues.filter((i) => !reported.has(i.path.join("."))) : [];
    throw new InvalidConfigError(file, [...[...issues, ...cloudIssues].map(describeIssue), ...crossProblems]);
  }
  const c = r.data;
  const problems: string[] = [...crossProblems];
  const cloud = cloudSections?.ok ? cloudConfig(cloudSections.value, raw, problems) : undefined;
  if (problems.length) throw new InvalidConfigError(file, problems);

  const lab = c["molt:lab"];
  const labName = lab?.name ?? derivedLabName(stack);
  return {
    file,
    sshUser: cloud?.ssh.user ?? c["molt:ssh"]?.user ?? "root",
    intent: {
      provider: c["molt:provider"],
      replicas: c["molt:replicas"],
      image: c["molt:image"],
      ...(c["molt:kubernetesVersion"] ? { kubernetesVersion: c["molt:kubernetesVersion"].replace(/^v/, "") } : {}),
      ...(cloud?.failureDomains.length ? { failureDomains: cloud.failureDomains } : {}),
      rollout: {
        maxSurge: c["molt:rollout"]?.maxSurge ?? 1,
        onFailure: c["molt:rollout"]?.onFailure ?? "rollback",
        maxAppliedLag: c["molt:rollout"]?.maxAppliedLag ?? 1000,
      },
      timeouts: {
        joinSeconds: c["molt:timeouts"]?.joinSeconds ?? 300,
        settleSeconds: c["molt:timeouts"]?.settleSeconds ?? 60,
        drainSeconds: c["molt:timeouts"]?.drainSeconds ?? 300,
      },
    },
    lab:
      c["molt:provider"] === "lab"
        ? {
            lab: labName,
            labRoot: lab?.root ?? process.env.MOLT_LAB_ROOT ?? "/var/lib/molt-lab",
            bridge: lab?.bridge ?? "moltbr0",
            subnet: lab?.subnet ?? "10.77.0.0/24",
            lbPort: lab?.lbPort ?? 6443,
          }
        : undefined,
    ...(cloud ? { cloud } : {}),
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
      ...(carried && meta.etcdVersion ? { etcdVersion: meta.etcdVersion.replace(/^v/, "") } : {}),
    },
  };
}

const KNOWN_KEYS = [
  "molt:provider",
  "molt:replicas",
  "molt:image",
  "molt:kubernetesVersion",
  "molt:rollout",
  "molt:timeouts",
  "molt:ssh",
  "molt:lab",
  "molt:failureDomains",
  "molt:bootstrap",
  "molt:aws",
  "molt:azure",
  "molt:vsphere",
  "molt:vsphereAntiAffinity",
];

function derivedLabName(stack: string): string {
  return stack
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, "-")
    .slice(0, 32);
}

/** Rules that span keys, on raw values (so they are reported even when other keys are invalid). */
function crossFieldProblems(raw: Record<string, unknown>, stack: string): string[] {
  const problems: string[] = [];
  const replicas = typeof raw["molt:replicas"] === "string" ? Number(raw["molt:replicas"]) : raw["molt:replicas"];
  const rolloutRaw = raw["molt:rollout"] as { maxSurge?: unknown } | undefined;
  if (rolloutRaw?.maxSurge === 0 && typeof replicas === "number" && replicas < 3) {
    problems.push(
      `molt:rollout.maxSurge: 0 (retire first) needs at least 3 replicas, or the cluster would lose quorum; use maxSurge 1`,
    );
  }
  if (raw["molt:provider"] === "lab") {
    const ssh = raw["molt:ssh"] as { privateKey?: unknown; port?: unknown } | undefined;
    if (ssh && (ssh.privateKey !== undefined || ssh.port !== undefined))
      problems.push(
        "molt:ssh: the lab makes its own client key and knows its machines' ports; only user applies there",
      );
    const lab = raw["molt:lab"] as { name?: unknown } | undefined;
    if (lab?.name === undefined && !nameRe.test(derivedLabName(stack))) {
      problems.push(
        `molt:lab.name: the stack name "${stack}" does not make a valid lab name (a lowercase DNS label); set molt:lab.name`,
      );
    }
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

// ---- cloud sections (molt:ssh, molt:failureDomains, molt:bootstrap, molt:aws, ...) ----
// Checked for cloud providers only; lab stacks pass them through as before.

const text = (what: string) => z.string({ message: what }).min(1, what);
const count = (min: number, what: string) =>
  z.number({ message: what }).int("a whole number").min(min, `at least ${min}`);
const stringMap = z.record(z.string(), z.string());
const azureId = (what: string) =>
  z.string({ message: what }).startsWith("/subscriptions/", `${what}: an Azure resource id (/subscriptions/...)`);
/** A message for a missing (or wrongly typed) value; zod's own for everything else. */
const required = (message: string) => ({
  error: (i: { code: string }) => (i.code === "invalid_type" ? message : undefined),
});

const bootstrapSchema = z
  .object(
    {
      controlPlaneEndpoint: text("host:port of the API load balancer, such as api.prod.example.com:6443"),
      install: z.discriminatedUnion(
        "source",
        [
          z.object({ source: z.literal("image") }).strict(),
          z.object({ source: z.literal("packages"), repository: z.string().optional() }).strict(),
        ],
        { message: "image (verify the binaries the image carries) or packages (install them from pkgs.k8s.io)" },
      ),
      clusterName: z.string().optional(),
      podSubnet: z.string().optional(),
      serviceSubnet: z.string().optional(),
      dnsDomain: z.string().optional(),
      apiServerCertSANs: z.array(z.string()).optional(),
      imageRepository: z.string().optional(),
      criSocket: z.string().optional(),
      cniManifest: z.string().optional(),
      removeEtcdMemberOnReset: z.boolean().optional(),
    },
    required("required on clouds: controlPlaneEndpoint, install and the cluster settings (see stacks/Pulumi.aws.yaml)"),
  )
  .strict();

const cloudCommon = {
  "molt:ssh": z.object(
    {
      user: z
        .string(
          required("required on clouds: the image's admin user that cloud-init creates (not root; molt uses sudo -n)"),
        )
        .refine(
          (u) => u !== "root",
          "not root: cloud images refuse root logins; use the image's admin user (molt uses sudo -n)",
        ),
      port: z.number().optional(),
      // Its form is checked with the other molt:ssh keys above; here only that it is there.
      privateKey: z
        .unknown()
        .refine((v) => v !== undefined, `required on clouds, as a Pulumi secret: ${SET_PRIVATE_KEY}`),
    },
    required("required on clouds: { user: <the image's admin user>, privateKey: <a Pulumi secret> }"),
  ),
  "molt:failureDomains": z
    .array(z.string().min(1))
    .refine((d) => new Set(d).size === d.length, "distinct names")
    .optional(),
  "molt:bootstrap": bootstrapSchema,
};

const awsSchema = z
  .object(
    {
      region: z.string().min(1).optional(),
      instanceType: text("an EC2 instance type such as m6i.large"),
      subnetIdsByZone: z
        .record(
          z.string(),
          z.string().startsWith("subnet-", "a subnet id (subnet-...)"),
          required("the subnet of each availability zone: { eu-central-1a: subnet-... }"),
        )
        .refine((m) => Object.keys(m).length > 0, "at least one zone: subnet id"),
      securityGroupIds: z
        .array(
          z.string().startsWith("sg-", "a security group id (sg-...)"),
          required("the control-plane security group ids: [sg-...]"),
        )
        .min(1, "at least one security group id"),
      apiTargetGroupArn: text("the ARN of the API load balancer's TCP 6443 target group").startsWith(
        "arn:",
        "the ARN of the API load balancer's TCP 6443 target group",
      ),
      rootVolume: z
        .object(
          {
            sizeGiB: count(8, "GiB of the root volume"),
            type: z.enum(["gp3", "gp2", "io1", "io2"]).optional(),
            iops: z.number().int().min(100).optional(),
            throughput: z.number().int().min(125).optional(),
            encrypted: z.boolean().optional(),
            kmsKeyId: z.string().min(1).optional(),
          },
          required("the root volume: { sizeGiB, type, iops, throughput }"),
        )
        .strict(),
      iamInstanceProfile: z.string().min(1).optional(),
      associatePublicIpAddress: z.boolean().optional(),
      sshAddress: z.enum(["private", "public"]).optional(),
      metadataHopLimit: z.number().int().min(1).max(64).optional(),
      tags: stringMap.optional(),
    },
    required("required for provider aws: the node settings (see stacks/Pulumi.aws.yaml)"),
  )
  .strict()
  .refine((a) => a.sshAddress !== "public" || a.associatePublicIpAddress === true, {
    message: 'sshAddress "public" needs associatePublicIpAddress: true',
    path: ["sshAddress"],
  });

const azureSchema = z
  .object(
    {
      resourceGroupName: text("the resource group of the nodes"),
      location: text("an Azure region such as westeurope"),
      vmSize: text("a VM size such as Standard_D4s_v5"),
      subnetId: azureId("the control-plane subnet"),
      apiBackendPoolId: azureId("the API load balancer's backend pool"),
      networkSecurityGroupId: azureId("a network security group").optional(),
      zones: z.array(z.string().min(1)).optional(),
      osDisk: z
        .object(
          { sizeGiB: count(30, "GiB of the OS disk"), storageAccountType: z.string().min(1).optional() },
          required("the OS disk: { sizeGiB, storageAccountType }"),
        )
        .strict(),
      acceleratedNetworking: z.boolean().optional(),
      tags: stringMap.optional(),
    },
    required("required for provider azure: the node settings (see stacks/Pulumi.azure.yaml)"),
  )
  .strict();

const vsphereDomainSchema = z
  .object({
    computeCluster: text("the DRS compute cluster of this domain"),
    resourcePool: z.string().min(1).optional(),
    datastore: text("the datastore of this domain"),
    host: z.string().min(1).optional(),
    network: z.string().min(1).optional(),
  })
  .strict();

const vsphereSchema = z
  .object(
    {
      datacenter: text("the datacenter name"),
      folder: z.string().min(1).optional(),
      network: text("the port group of the control-plane network"),
      numCpus: count(2, "vCPUs per node"),
      memoryMiB: count(2048, "MiB of memory per node"),
      diskGiB: count(10, "GiB of the OS disk"),
      guestNetTimeoutMinutes: z.number().int().min(1).optional(),
      failureDomains: z
        .record(
          z.string(),
          vsphereDomainSchema,
          required("where VMs go, by domain name: { rack-a: { computeCluster, datastore } }"),
        )
        .refine((m) => Object.keys(m).length > 0, "at least one domain (name: { computeCluster, datastore })"),
    },
    required("required for provider vsphere: the node settings (see stacks/Pulumi.vsphere.yaml)"),
  )
  .strict();

const cloudSchemas = {
  aws: z.object({ ...cloudCommon, "molt:aws": awsSchema }),
  azure: z.object({ ...cloudCommon, "molt:azure": azureSchema }),
  vsphere: z.object({
    ...cloudCommon,
    "molt:vsphere": vsphereSchema,
    "molt:vsphereAntiAffinity": z.object({ mandatory: z.boolean().optional() }).strict().optional(),
  }),
};

type CloudKind = keyof typeof cloudSchemas;
type CloudSections = { [K in CloudKind]: { kind: K; sections: z.infer<(typeof cloudSchemas)[K]> } }[CloudKind];

function isCloudKind(p: unknown): p is CloudKind {
  return p === "aws" || p === "azure" || p === "vsphere";
}

function parseCloudSections(
  kind: CloudKind,
  config: unknown,
): { ok: true; value: CloudSections } | { ok: false; issues: z.core.$ZodIssue[] } {
  const r = cloudSchemas[kind].safeParse(config);
  return r.success
    ? { ok: true, value: { kind, sections: r.data } as CloudSections }
    : { ok: false, issues: r.error.issues };
}

/** The typed settings of a cloud stack; what the schemas cannot see is added to `problems`. */
function cloudConfig(parsed: CloudSections, raw: Record<string, unknown>, problems: string[]): CloudConfig {
  const { kind, sections: s } = parsed;
  for (const key of ["molt:lab", "molt:aws", "molt:azure", "molt:vsphere", "molt:vsphereAntiAffinity"]) {
    if (raw[key] !== undefined && !(key in cloudSchemas[kind].shape))
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
  const image = String(raw["molt:image"]);
  if (kind === "aws" && !/^ami-[0-9a-f]{8,17}$/.test(image))
    problems.push(`molt:image: an AMI id such as ami-0123456789abcdef0 (got ${JSON.stringify(image)})`);
  if (kind === "azure") problemOf(problems, "molt:image", () => imageReference(image));

  const bootstrap: KubeadmBootstrapSettings = s["molt:bootstrap"];
  try {
    validateSettings(bootstrap);
  } catch (e) {
    if (!(e instanceof InvalidBootstrapSettingError)) throw e;
    problems.push(`molt:bootstrap.${e.setting}: ${e.message.slice(e.setting.length + 2)}`);
  }

  // The domains a machine can be placed in; molt:failureDomains defaults to all of them.
  const [known, where] =
    parsed.kind === "aws"
      ? [Object.keys(parsed.sections["molt:aws"].subnetIdsByZone), "molt:aws.subnetIdsByZone"]
      : parsed.kind === "azure"
        ? [parsed.sections["molt:azure"].zones ?? [], "molt:azure.zones"]
        : [Object.keys(parsed.sections["molt:vsphere"].failureDomains), "molt:vsphere.failureDomains"];
  const failureDomains = s["molt:failureDomains"] ?? known;
  for (const d of failureDomains)
    if (!known.includes(d))
      problems.push(`molt:failureDomains: ${JSON.stringify(d)} is not in ${where} (${known.join(", ") || "none"})`);
  // Without a domain, a node gets the only placement there is; with several, it needs one.
  if (failureDomains.length === 0 && (kind === "azure" ? known.length > 0 : known.length > 1)) {
    problems.push(`molt:failureDomains: empty, but ${where} has ${known.join(", ")}; list the domains new nodes go to`);
  }

  const { user, port } = s["molt:ssh"];
  const common = { ssh: { user, ...(port !== undefined ? { port } : {}) }, failureDomains, bootstrap };
  switch (parsed.kind) {
    case "aws":
      return { provider: "aws", ...common, aws: parsed.sections["molt:aws"] };
    case "azure":
      return {
        provider: "azure",
        ...common,
        azure: { ...parsed.sections["molt:azure"], zones: parsed.sections["molt:azure"].zones ?? [] },
      };
    case "vsphere":
      return {
        provider: "vsphere",
        ...common,
        vsphere: parsed.sections["molt:vsphere"],
        antiAffinity: { mandatory: parsed.sections["molt:vsphereAntiAffinity"]?.mandatory ?? false },
      };
  }
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
