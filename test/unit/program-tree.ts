// The lab program's resource tree under Pulumi mocks, reduced to what decides whether an
// existing lab stack would see a diff: every resource's URN and a digest of its inputs.
// Shared by test/unit/program.test.ts and the one-off run that took the snapshot there
// from the code before the clouds were wired in.
import { createHash } from "node:crypto";
import * as pulumi from "@pulumi/pulumi";
import type { NodeEntry } from "../../orchestrator/core/nodes";
import type { LabSettings } from "../../infra/lab/settings";

export const LAB_NODES: NodeEntry[] = [1, 2, 3].map((g) => ({
  name: `lab-cp-${g}`,
  image: "lab-v1",
  role: "control-plane",
  generation: g,
  init: g === 1,
}));
export const LAB_SETTINGS: LabSettings = {
  lab: "lab",
  labRoot: "/var/lib/molt-lab",
  bridge: "moltbr0",
  subnet: "10.77.0.0/24",
  lbPort: 6443,
};

export interface LabTree {
  /** URN -> first 16 hex digits of sha256 over the inputs (scripts left out: their text never causes a diff). */
  resources: Record<string, string>;
  molt: unknown;
}

type LabBuild = (input: {
  provider: "lab";
  nodes: NodeEntry[];
  sshUser: string;
  lab: LabSettings;
  joinDeadlineSeconds: number;
}) => () => Promise<Record<string, unknown>>;

/** What the lab's resources output under mocks, besides their inputs (the snapshot depends on these). */
export function labMockOutputs(type: string, name: string): Record<string, unknown> {
  const extra: Record<string, unknown> = {};
  if (type.endsWith("molt:LabMachine"))
    Object.assign(extra, { address: `10.77.0.${10 + Number(/(\d+)-machine$/.exec(name)![1])}`, sshPort: 22 });
  if (type.endsWith("molt:LabLoadBalancer")) Object.assign(extra, { address: "10.77.0.1:6443" });
  if (type.endsWith("molt:SshKeyPair"))
    Object.assign(extra, {
      privateKey: `PRIVATE ${name}`,
      publicKey: `ssh-ed25519 AAAA${name.replace(/[^A-Za-z0-9]/g, "")}`,
    });
  if (type.endsWith("molt:LabJoinMaterial")) Object.assign(extra, { material: "material" });
  return extra;
}

/** Pulumi mocks for the lab program (project molt, stack lab); `observe` sees each registration. */
export function setLabMocks(observe?: (a: pulumi.runtime.MockResourceArgs) => void): Promise<void> {
  return pulumi.runtime.setMocks(
    {
      newResource(a) {
        observe?.(a);
        return {
          id: `${a.name}-id`,
          state: { ...(a.inputs as Record<string, unknown>), ...labMockOutputs(a.type, a.name) },
        };
      },
      call: () => ({}),
    },
    "molt",
    "lab",
    false,
  );
}

export async function labTree(buildProgram: LabBuild): Promise<LabTree> {
  const digests = new Map<string, string>();
  await setLabMocks((a) => {
    const inputs = { ...(a.inputs as Record<string, unknown>) };
    delete inputs.__provider;
    if (a.type.endsWith("molt:RemoteCommand")) {
      inputs.create = "<script>";
      inputs.delete = "<script>";
    }
    digests.set(`${a.type}::${a.name}`, createHash("sha256").update(JSON.stringify(inputs)).digest("hex").slice(0, 16));
  });
  const out = await buildProgram({
    provider: "lab",
    nodes: LAB_NODES,
    sshUser: "root",
    lab: LAB_SETTINGS,
    joinDeadlineSeconds: 300,
  })();
  const molt = await new Promise((resolve) => (out.molt as pulumi.Output<unknown>).apply(resolve));
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const settings = require("@pulumi/pulumi/runtime/settings") as {
    waitForRPCs(): Promise<void>;
    getMonitor(): { getRegisteredResources(): Map<string, unknown> };
  };
  await settings.waitForRPCs();
  const resources: Record<string, string> = {};
  for (const urn of [...settings.getMonitor().getRegisteredResources().keys()].sort()) {
    const [type, name] = urn.split("::").slice(2);
    resources[urn] = digests.get(`${type.split("$").pop()}::${name}`) ?? "?";
  }
  return { resources, molt };
}
