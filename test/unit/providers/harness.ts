// Pulumi mocks for the provider tests: records every registered resource (with the
// inputs as the engine would see them) and every resource's options and raw props (via
// a transformation, to check secretness and replacement options).
import * as pulumi from "@pulumi/pulumi";
import { generateSshKeyPair } from "../../../infra/remote/ssh";
import type { HostKeyPair, SshSettings } from "../../../infra/node";
import type { NodeEntry } from "../../../orchestrator/core/nodes";
import type { KubeadmBootstrapSettings } from "../../../infra/kubeadm/settings";

export interface Registered {
  type: string;
  name: string;
  inputs: Record<string, unknown>;
  /** The id the engine is asked to import (the `import` resource option), if any. */
  importId?: string;
}

export interface Transformed {
  type: string;
  name: string;
  props: Record<string, unknown>;
  opts: pulumi.ResourceOptions;
}

export interface Recorder {
  resources: Registered[];
  invokes: Array<{ token: string; inputs: Record<string, unknown> }>;
  transformed: Transformed[];
  transformation: pulumi.ResourceTransformation;
}

/** Extra outputs a mocked cloud returns, by resource type. */
export type CloudState = (type: string, name: string, inputs: Record<string, unknown>) => Record<string, unknown>;

export function installMocks(
  state: CloudState,
  invoke: (token: string, inputs: Record<string, unknown>) => Record<string, unknown> = () => ({}),
): Recorder {
  const rec: Recorder = {
    resources: [],
    invokes: [],
    transformed: [],
    transformation: (a) => {
      rec.transformed.push({ type: a.type, name: a.name, props: a.props as Record<string, unknown>, opts: a.opts });
      return undefined;
    },
  };
  // Not awaited: setMocks is async in name only, it installs the mocks before it returns.
  void pulumi.runtime.setMocks(
    {
      newResource(args) {
        const inputs = args.inputs as Record<string, unknown>;
        rec.resources.push({ type: args.type, name: args.name, inputs, ...(args.id ? { importId: args.id } : {}) });
        return { id: `${args.name}-id`, state: { ...inputs, ...state(args.type, args.name, inputs) } };
      },
      call(args) {
        const inputs = args.inputs as Record<string, unknown>;
        rec.invokes.push({ token: args.token, inputs });
        return invoke(args.token, inputs);
      },
    },
    "molt",
    "test",
    false,
  );
  return rec;
}

/** Waits until every pending registration and invoke has reached the mocks. */
export async function settle(): Promise<void> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const settings = require("@pulumi/pulumi/runtime/settings") as { waitForRPCs(): Promise<void> };
  await settings.waitForRPCs();
}

export function value<T>(o: pulumi.Output<T>): Promise<T> {
  return new Promise((resolve) => o.apply((v) => resolve(v)));
}

export async function isSecret(x: unknown): Promise<boolean> {
  if (!pulumi.Output.isInstance(x)) return false;
  return (x as unknown as { isSecret: Promise<boolean> }).isSecret;
}

export const DYNAMIC = "pulumi-nodejs:dynamic/molt:RemoteCommand";

export function byType(rec: Recorder, type: string): Registered[] {
  return rec.resources.filter((r) => r.type === type);
}

export function one(rec: Recorder, type: string, name?: string): Registered {
  const found = byType(rec, type).filter((r) => name === undefined || r.name === name);
  if (found.length !== 1)
    throw new Error(
      `expected one ${type}${name ? ` named ${name}` : ""}, found ${found.length}: ` +
        `${rec.resources.map((r) => `${r.type}/${r.name}`).join(", ")}`,
    );
  return found[0];
}

/** The RemoteCommand of a node (create script holds "kubeadm"). */
export function bootstrapOf(rec: Recorder, nodeName: string): Registered {
  return one(rec, DYNAMIC, `${nodeName}-kubeadm`);
}

export const clientKey = generateSshKeyPair("molt@test");
export const hostKeyA = generateSshKeyPair("cp-g2-a");

export function fixtures(overrides: Partial<NodeEntry> = {}): {
  node: NodeEntry;
  ssh: SshSettings;
  hostKey: HostKeyPair;
  bootstrap: KubeadmBootstrapSettings;
} {
  return {
    node: {
      name: "cp-g2-a",
      image: "ami-0123456789abcdef0",
      kubernetesVersion: "1.34.2",
      failureDomain: "eu-central-1a",
      role: "control-plane",
      generation: 2,
      init: false,
      ...overrides,
    },
    ssh: { user: "ubuntu", privateKey: pulumi.secret(clientKey.privateKey), publicKey: clientKey.publicKey },
    hostKey: { privateKey: pulumi.secret(hostKeyA.privateKey), publicKey: hostKeyA.publicKey },
    bootstrap: { controlPlaneEndpoint: "api.prod.example.com:6443", install: { source: "image" }, clusterName: "prod" },
  };
}

export const JOIN = {
  token: "abcdef.0123456789abcdef",
  certificateKey: "c".repeat(64),
  caCertHash: `sha256:${"d".repeat(64)}`,
};

/** Every string in a (deserialized) value, deeply. */
export function strings(v: unknown): string[] {
  if (typeof v === "string") return [v];
  if (Array.isArray(v)) return v.flatMap(strings);
  if (v && typeof v === "object") return Object.values(v).flatMap(strings);
  return [];
}

const SECRET_SIG = "4dabf18193072939515e22adb298388d";

/** True when the engine would receive this value as a secret. */
export function isSecretValue(v: unknown): boolean {
  return typeof v === "object" && v !== null && SECRET_SIG in v;
}

/** The value with every secret wrapper removed (what a node would finally get). */
export function reveal(v: unknown): unknown {
  if (isSecretValue(v)) return reveal((v as { value: unknown }).value);
  if (Array.isArray(v)) return v.map(reveal);
  if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, reveal(x)]));
  return v;
}
