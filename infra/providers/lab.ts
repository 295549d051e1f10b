// Provider "lab": molt's embedded cloud on this host (infra/lab/): machines in their own
// namespaces, a real OpenSSH server each, HAProxy in front of the API servers. Needs no
// engine plugin: every resource is one of molt's dynamic providers.
import { z } from "zod";
import type { LabSettings } from "../lab/settings";
import { labProgram, type LabProgramInput } from "../lab/program";
import type { LabProviderDefinition } from "./provider";

const NAME = /^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$/;
const MACHINE = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

const labSection = z
  .object({
    name: z.string().regex(NAME, "a lowercase DNS label of at most 32 characters").optional(),
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
    // The host takes no address on the bridge: machines are reached only through
    // molt:ssh.bastion (a private subnet).
    isolated: z.boolean().optional(),
    // An existing HAProxy of the lab (an adopted cluster's) instead of molt's own.
    loadBalancer: z
      .object({
        lab: z.string().regex(NAME, "the lab name the load balancer belongs to"),
        // kubeadm's controlPlaneEndpoint of the cluster: what the nodes use.
        address: z.string().regex(/^\d+\.\d+\.\d+\.\d+:\d{1,5}$/, "IPv4:port, such as 10.77.118.2:6443"),
        netns: z
          .string()
          .regex(/^[A-Za-z0-9_.-]+$/, "a network namespace name")
          .optional(),
        bind: z
          .string()
          .regex(/^\d+\.\d+\.\d+\.\d+$/, "an IPv4 address")
          .optional(),
      })
      .strict()
      .optional(),
    // molt's HAProxy checks as slowly as a cloud load balancer (AWS's words), with a deregistration delay.
    lbHealthCheck: z
      .object({
        intervalSeconds: z.number().int().min(1).max(300),
        unhealthyThreshold: z.number().int().min(1).max(10),
        healthyThreshold: z.number().int().min(1).max(10),
        deregistrationDelaySeconds: z.number().int().min(0).max(3600),
      })
      .strict()
      .optional(),
  })
  .strict();

type Section = z.infer<typeof labSection>;

/** The lab name a stack gets when molt:lab.name is not set. */
export function derivedLabName(stack: string): string {
  return stack
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, "-")
    .slice(0, 32);
}

export const labProvider: LabProviderDefinition<LabSettings, LabProgramInput> = {
  family: "lab",
  kind: "lab",
  sections: { "molt:lab": labSection.optional() },
  plugins: [],
  clusterWideTypes: [],
  // A machine of the stack's lab, by name (the lab checks before recording that it runs and
  // presents the host key adoption pinned).
  importIdProblem: (id) => (MACHINE.test(id) ? undefined : `"${id}" is not a lab machine name`),
  problems(raw, stack) {
    const problems: string[] = [];
    const ssh = raw["molt:ssh"] as { privateKey?: unknown; port?: unknown; bastion?: unknown } | undefined;
    if (ssh && (ssh.privateKey !== undefined || ssh.port !== undefined))
      problems.push(
        "molt:ssh: the lab makes its own client key and knows its machines' ports; only user, agent and bastion " +
          "apply there",
      );
    const lab = raw["molt:lab"] as
      { name?: unknown; isolated?: unknown; loadBalancer?: unknown; lbHealthCheck?: unknown } | undefined;
    const vip = (raw["molt:apiEndpoint"] as { mode?: unknown } | undefined)?.mode === "vip";
    if (lab?.lbHealthCheck !== undefined && (lab.loadBalancer !== undefined || vip))
      problems.push(
        "molt:lab.lbHealthCheck: it sets molt's own HAProxy up; with " +
          `${vip ? "molt:apiEndpoint mode vip there is none" : "molt:lab.loadBalancer the cluster's own serves"}: ` +
          "remove one of the two",
      );
    if (lab?.isolated === true && ssh?.bastion === undefined)
      problems.push(
        "molt:lab.isolated: the host has no address on an isolated bridge; set molt:ssh.bastion to a machine that " +
          "reaches it",
      );
    if (lab?.isolated === true && lab.loadBalancer === undefined)
      problems.push(
        "molt:lab.isolated: the host cannot serve a load balancer on a bridge it has no address on; " +
          "name the cluster's own in molt:lab.loadBalancer",
      );
    if (lab?.name === undefined && !NAME.test(derivedLabName(stack))) {
      problems.push(
        `molt:lab.name: the stack name "${stack}" does not make a valid lab name (a lowercase DNS label); set ` +
          `molt:lab.name`,
      );
    }
    return problems;
  },
  settings(sections, stack) {
    const lab = sections["molt:lab"] as Section | undefined;
    return {
      lab: lab?.name ?? derivedLabName(stack),
      labRoot: lab?.root ?? process.env.MOLT_LAB_ROOT ?? "/var/lib/molt-lab",
      bridge: lab?.bridge ?? "moltbr0",
      subnet: lab?.subnet ?? "10.77.0.0/24",
      lbPort: lab?.lbPort ?? 6443,
      ...(lab?.isolated ? { isolated: true as const } : {}),
      ...(lab?.loadBalancer ? { loadBalancer: lab.loadBalancer } : {}),
      ...(lab?.lbHealthCheck ? { lbHealthCheck: lab.lbHealthCheck } : {}),
    };
  },
  program: labProgram,
};
