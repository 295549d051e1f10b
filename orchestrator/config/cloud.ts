// The cloud sections of a stack (molt:ssh, molt:failureDomains, molt:bootstrap and the
// provider's own): checked for cloud providers only, typed into StackConfig.cloud.
import { z } from "zod";
import { InvalidBootstrapSettingError, kubernetesVersion, validateSettings } from "../../infra/kubeadm/settings";
import { cloudCommonSections, type CloudCommonSections } from "../../infra/providers/cloud-config";
import { cloudConfigOf, type AnyCloudProvider, type CloudConfig } from "../../infra/providers/registry";
import { PROVIDER_SECTION_KEYS } from "./schema";

export function parseCloudSections(
  def: AnyCloudProvider,
  config: unknown,
): { ok: true; sections: CloudCommonSections & Record<string, unknown> } | { ok: false; issues: z.core.$ZodIssue[] } {
  const r = z.object({ ...cloudCommonSections, ...def.sections }).safeParse(config);
  return r.success
    ? { ok: true, sections: r.data as CloudCommonSections & Record<string, unknown> }
    : { ok: false, issues: r.error.issues };
}

/** The typed settings of a cloud stack; what the schemas cannot see is added to `problems`. */
export function cloudConfig(
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
      "molt:kubernetesVersion: required on clouds: the exact Kubernetes version kubeadm installs or verifies, such " +
        "as 1.34.2",
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
export function problemOf(problems: string[], key: string, check: () => unknown): void {
  try {
    check();
  } catch (e) {
    problems.push(
      `${key}: ` +
        `${e instanceof InvalidBootstrapSettingError ? e.message.slice(e.setting.length + 2) : (e as Error).message}`,
    );
  }
}
