// User intent from stacks/Pulumi.<stack>.yaml, validated with a schema. Every bad value
// is reported with its key, what was wrong and what to write instead; nothing runs before
// the whole file is valid. The keys every stack has are checked here; each provider's own
// sections, image rules and failure domains come from its definition
// (infra/providers/registry.ts).
import type { SshAccessSettings } from "../core/nodes";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { readLabImage } from "../../infra/lab/image";
import type { LabSettings } from "../../infra/lab/settings";
import { providerOf, type CloudConfig } from "../../infra/providers/registry";
import type { VipSettings } from "../../infra/vip/keepalived";
import { DEFAULT_SHUTDOWN_DELAY_SECONDS } from "../../infra/kubeadm/settings";
import type { VsphereNodeSettings } from "../../infra/providers/vsphere/config";
import { checkStaticAddresses, resolveApiEndpoint } from "./endpoint";
import { resolvePromotion, type PromotionSettings, type Release } from "../promotion/release";
import type { ChainImage, Intent } from "../core/model";
import { type MaintenanceWindow } from "../core/model";
import { DEFAULT_HOOK_TIMEOUT_SECONDS } from "../controls/hook-config";
import { baseSections, everySectionPresent, crossFieldProblems, describeIssue } from "./schema";
import { parseCloudSections, cloudConfig } from "./cloud";
import { chainImagesProblems, cloudImageProblems, imageEntries, type ImageEntry } from "./images";

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
  /** Where the lease lives (molt:lock.in); undefined: beside the state where molt can write, else the cluster. */
  lockIn?: "backend" | "cluster";
  /** molt:apiEndpoint mode vip: keepalived on the control-plane nodes (lab, vsphere); absent: a load balancer. */
  apiEndpoint?: VipSettings;
  /** molt:release: what this stack's rollout converges to (orchestrator/promotion/). */
  release?: Release;
  /** molt:promotion: the soak and the stacks a release must have been verified on first. */
  promotion: PromotionSettings;
  /** molt:notify: a failed hook's output goes to webhooks and into reasons only when asked. */
  notify: { includeHookOutput: boolean };
  /** molt:images as written; on clouds also in intent.chain, on the lab once resolveLabImage read the images. */
  images?: ImageEntry[];
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
      `no such file: create ${file} with at least molt:provider, molt:replicas and molt:image (see ` +
        `stacks/Pulumi.lab.yaml)`,
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
  // molt:images: on clouds every entry says its version, so the chain is checked here; the
  // lab's entries are checked against their images in resolveLabImage.
  const images = imageEntries(c["molt:images"]);
  const chain =
    def?.family === "cloud" && images.length
      ? images.map((e) => ({ ...e, kubernetesVersion: e.kubernetesVersion ?? "" }))
      : undefined;
  if (def?.family === "cloud" && images.length) {
    problems.push(...cloudImageProblems(images, (i) => def.imageProblem(i)));
    if (images.every((e) => e.kubernetesVersion !== undefined))
      problems.push(
        ...chainImagesProblems(chain!, { image: c["molt:image"], kubernetesVersion: c["molt:kubernetesVersion"] }),
      );
  }
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
    notify: { includeHookOutput: c["molt:notify"]?.includeHookOutput ?? false },
    ...(images.length ? { images } : {}),
    ...(c["molt:lock"]?.in ? { lockIn: c["molt:lock"].in } : {}),
    intent: {
      provider: c["molt:provider"],
      replicas: c["molt:replicas"],
      image: c["molt:image"],
      ...(c["molt:kubernetesVersion"] ? { kubernetesVersion: c["molt:kubernetesVersion"] } : {}),
      ...(chain ? { chain } : {}),
      ...(cloud?.failureDomains.length ? { failureDomains: cloud.failureDomains } : {}),
      ...(staticAddressPool.length ? { staticAddressPool } : {}),
      ...(apiEndpoint ? { vip: { address: apiEndpoint.address } } : {}),
      ...(c["molt:encryptionAtRest"] ? { encryptionAtRest: true } : {}),
      ...(cloud
        ? {
            apiServerShutdownDelaySeconds:
              cloud.bootstrap.apiServerShutdownDelaySeconds ?? DEFAULT_SHUTDOWN_DELAY_SECONDS,
          }
        : {}),
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
        ...(c["molt:rollout"]?.pruneWithNextSurge ? { pruneWithNextSurge: true } : {}),
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
        ...(c["molt:rollout"]?.stepSoakSeconds ? { stepSoakSeconds: c["molt:rollout"].stepSoakSeconds } : {}),
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
      `molt:image: lab image "${cfg.intent.image}" does not exist in ${dir} (have: ${have.join(", ") || "none"}); ` +
        `build images with tools/lab/build-images.sh`,
    ]);
  }
  const asked = cfg.intent.kubernetesVersion;
  const carried = meta.kubernetesVersion?.replace(/^v/, "");
  if (asked !== undefined && carried === undefined) {
    throw new InvalidConfigError(cfg.file, [
      `molt:kubernetesVersion: lab image "${meta.name}" runs etcd only, without Kubernetes; remove the key or use a ` +
        `k8s-* image`,
    ]);
  }
  if (asked !== undefined && asked !== carried) {
    throw new InvalidConfigError(cfg.file, [
      `molt:kubernetesVersion: ${asked} does not match lab image "${meta.name}", which carries Kubernetes ` +
        `${carried}; remove the key (the image decides) or pick the image of ${asked}`,
    ]);
  }
  if (cfg.intent.encryptionAtRest && carried === undefined) {
    throw new InvalidConfigError(cfg.file, [
      `molt:encryptionAtRest: lab image "${meta.name}" runs etcd only: there is no API server to encrypt Secrets; ` +
        "remove the key or use a k8s-* image",
    ]);
  }
  const chain = cfg.images?.length ? labChain(cfg, dir, { image: meta.name, kubernetesVersion: carried }) : undefined;
  const { kubernetesVersion: _k, etcdVersion: _e, ...rest } = cfg.intent;
  return {
    ...cfg,
    intent: {
      ...rest,
      ...(carried ? { kubernetesVersion: carried } : {}),
      // etcd's rules (one minor at a time, the patch floors) apply to etcd-only images too.
      ...(meta.etcdVersion ? { etcdVersion: meta.etcdVersion.replace(/^v/, "") } : {}),
      ...(chain ? { chain } : {}),
    },
  };
}

/**
 * molt:images on the lab: each image exists and carries Kubernetes of its key's minor (a
 * version written beside it must be the image's), and the chain fits the target.
 */
function labChain(cfg: StackConfig, dir: string, target: { image: string; kubernetesVersion?: string }): ChainImage[] {
  const problems: string[] = [];
  const chain: ChainImage[] = [];
  for (const e of cfg.images ?? []) {
    const key = `molt:images."${e.minor}"`;
    const meta = readLabImage(cfg.lab!.labRoot, e.image);
    const carried = meta?.kubernetesVersion?.replace(/^v/, "");
    if (!meta) problems.push(`${key}: lab image "${e.image}" does not exist in ${dir}; build it (tools/lab/)`);
    else if (carried === undefined) problems.push(`${key}: lab image "${e.image}" runs etcd only, without Kubernetes`);
    else if (e.kubernetesVersion !== undefined && e.kubernetesVersion !== carried)
      problems.push(
        `${key}: kubernetesVersion ${e.kubernetesVersion} does not match lab image "${e.image}", which carries ` +
          `${carried}; write the image name alone (the image decides)`,
      );
    else
      chain.push({
        minor: e.minor,
        image: e.image,
        kubernetesVersion: carried,
        ...(meta.etcdVersion ? { etcdVersion: meta.etcdVersion.replace(/^v/, "") } : {}),
      });
  }
  if (!problems.length) problems.push(...chainImagesProblems(chain, target));
  if (problems.length) throw new InvalidConfigError(cfg.file, problems);
  return chain;
}

/** etcd backups kept per stack unless molt:backups.keep says otherwise. */
export const DEFAULT_BACKUPS_KEPT = 3;
