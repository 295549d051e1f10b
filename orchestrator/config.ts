// User intent from stacks/Pulumi.<stack>.yaml, validated with a schema. Every bad value
// is reported with its key, what was wrong and what to write instead; nothing runs before
// the whole file is valid.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import * as semver from "semver";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import type { LabSettings } from "../infra/lab/node";
import type { Intent } from "./model";

export class InvalidConfigError extends Error {
  constructor(readonly file: string, readonly problems: string[]) {
    super(`invalid configuration in ${file}; nothing was changed:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "InvalidConfigError";
  }
}

const nameRe = /^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$/;

const labSchema = z
  .object({
    name: z.string().regex(nameRe, "a lowercase DNS label of at most 32 characters").optional(),
    root: z.string().startsWith("/", "an absolute path").optional(),
    bridge: z.string().regex(/^[a-zA-Z0-9_-]{1,15}$/, "a Linux interface name of at most 15 characters").optional(),
    subnet: z.string().regex(/^\d+\.\d+\.\d+\.0\/24$/, "an IPv4 /24 such as 10.77.0.0/24").optional(),
    lbPort: z.number().int().min(1).max(65535).optional(),
  })
  .strict();

const configSchema = z
  .object({
    "molt:provider": z.enum(["lab", "aws", "azure", "vsphere"], { message: "one of lab, aws, azure, vsphere" }),
    // Pulumi rewrites top-level values of the stack file as strings ("3").
    "molt:replicas": z.preprocess((v) => (typeof v === "string" && /^\d+$/.test(v) ? Number(v) : v), z.number({ message: "a number" }).int("a whole number").min(1, "at least 1").max(9, "at most 9").refine((n) => n % 2 === 1, "an odd number (stacked etcd: an even count adds no fault tolerance)")),
    "molt:image": z.string().min(1, "the base image: a lab image, AMI, Azure image reference or vSphere template"),
    "molt:kubernetesVersion": z.string().refine((v) => semver.valid(v.replace(/^v/, "")) !== null, "a full version such as 1.34.2").optional(),
    "molt:rollout": z
      .object({
        maxSurge: z.union([z.literal(0), z.literal(1)], { message: "0 or 1" }).optional(),
        maxUnavailable: z.literal(0, { message: "0: molt never takes a member away before its replacement is healthy" }).optional(),
        onFailure: z.enum(["rollback", "pause"]).optional(),
        maxAppliedLag: z.number().int().min(0).optional(),
      })
      .strict()
      .optional(),
    "molt:timeouts": z
      .object({
        joinSeconds: z.number().int().min(10).max(7200).optional(),
        settleSeconds: z.number().int().min(1).max(3600).optional(),
      })
      .strict()
      .optional(),
    "molt:ssh": z.object({ user: z.string().regex(/^[a-z_][a-z0-9_-]*$/, "a Unix user name").optional() }).strict().optional(),
    "molt:lab": labSchema.optional(),
  })
  .passthrough();

export interface StackConfig {
  intent: Intent;
  sshUser: string;
  lab?: LabSettings;
  file: string;
}

export function stackConfigPath(workDir: string, stack: string): string {
  return join(workDir, "stacks", `Pulumi.${stack}.yaml`);
}

export function loadStackConfig(workDir: string, stack: string): StackConfig {
  if (!/^[A-Za-z0-9_.-]+$/.test(stack)) throw new InvalidConfigError(`--stack ${stack}`, [`stack name "${stack}" may only contain letters, digits, '-', '_' and '.'`]);
  const file = stackConfigPath(workDir, stack);
  if (!existsSync(file)) {
    throw new InvalidConfigError(file, [`no such file: create ${file} with at least molt:provider, molt:replicas and molt:image (see stacks/Pulumi.lab.yaml)`]);
  }
  let doc: unknown;
  try {
    doc = parseYaml(readFileSync(file, "utf8"));
  } catch (e) {
    throw new InvalidConfigError(file, [`not valid YAML: ${(e as Error).message}`]);
  }
  const config = (doc as { config?: unknown } | null)?.config;
  if (!config || typeof config !== "object") throw new InvalidConfigError(file, ["it has no `config:` map"]);
  const r = configSchema.safeParse(config);
  if (!r.success) {
    throw new InvalidConfigError(
      file,
      r.error.issues.map((i) => `${i.path.join(".") || "config"}: ${i.message}${"input" in i && i.input !== undefined ? ` (got ${JSON.stringify(i.input)})` : ""}`),
    );
  }
  const c = r.data;
  const problems: string[] = [];
  const maxSurge = c["molt:rollout"]?.maxSurge ?? 1;
  if (maxSurge === 0 && c["molt:replicas"] < 3) {
    problems.push(`molt:rollout.maxSurge: 0 (retire first) needs at least 3 replicas, or the cluster would lose quorum; use maxSurge 1`);
  }
  if (c["molt:provider"] === "lab" && c["molt:kubernetesVersion"] !== undefined) {
    problems.push("molt:kubernetesVersion: the lab runs etcd-only clusters in this version of molt; remove the key");
  }
  if (problems.length) throw new InvalidConfigError(file, problems);

  const lab = c["molt:lab"];
  const labName = lab?.name ?? stack.toLowerCase().replace(/[^a-z0-9-]/g, "-").slice(0, 32);
  return {
    file,
    sshUser: c["molt:ssh"]?.user ?? "root",
    intent: {
      provider: c["molt:provider"],
      replicas: c["molt:replicas"],
      image: c["molt:image"],
      ...(c["molt:kubernetesVersion"] ? { kubernetesVersion: c["molt:kubernetesVersion"].replace(/^v/, "") } : {}),
      rollout: {
        maxSurge,
        onFailure: c["molt:rollout"]?.onFailure ?? "rollback",
        maxAppliedLag: c["molt:rollout"]?.maxAppliedLag ?? 1000,
      },
      timeouts: {
        joinSeconds: c["molt:timeouts"]?.joinSeconds ?? 300,
        settleSeconds: c["molt:timeouts"]?.settleSeconds ?? 60,
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
  };
}
