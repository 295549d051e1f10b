// The Pulumi program molt runs inline: one ControlPlaneNode per entry of the node list,
// plus the cluster-wide pieces of the provider. It also writes the node list back into
// the stack outputs, which is where molt reads it from: the list lives with the state.
import * as pulumi from "@pulumi/pulumi";
import type { ControlPlaneNodeOutputs, NodeEndpoint, NodeEntry, SshSettings } from "./node";
import type { KubeadmBootstrapSettings } from "./kubeadm/settings";
import { LabLoadBalancer } from "./lab/lb";
import { LabControlPlaneNode, type LabSettings } from "./lab/node";
import { AwsControlPlaneNode, type AwsNodeSettings } from "./providers/aws";
import { AzureControlPlaneNode, type AzureNodeSettings } from "./providers/azure";
import { publicKeyOfPrivateKey, type CloudControlPlaneNodeArgs } from "./providers/cloud-common";
import {
  VsphereControlPlaneAntiAffinity,
  VsphereControlPlaneNode,
  type VsphereNodeSettings,
} from "./providers/vsphere";
import type { ConnectionArgs, RemoteCommand } from "./remote/command";
import { SshKeyPair } from "./remote/keypair";

export const NODE_LIST_SCHEMA = 1;

export type ProgramInput = LabProgramInput | AwsProgramInput | AzureProgramInput | VsphereProgramInput;

export interface LabProgramInput {
  provider: "lab";
  nodes: NodeEntry[];
  sshUser: string;
  lab: LabSettings;
  joinDeadlineSeconds: number;
}

/**
 * What every cloud takes. The SSH client key is not an input: it is the stack's secret
 * config value `molt:ssh.privateKey`, read (decrypted by the engine) when the program
 * runs, so it never passes through molt's own code or files.
 */
interface CloudProgramInput {
  nodes: NodeEntry[];
  ssh: { user: string; port?: number };
  bootstrap: KubeadmBootstrapSettings;
}

export interface AwsProgramInput extends CloudProgramInput {
  provider: "aws";
  aws: AwsNodeSettings;
}

export interface AzureProgramInput extends CloudProgramInput {
  provider: "azure";
  azure: AzureNodeSettings;
}

export interface VsphereProgramInput extends CloudProgramInput {
  provider: "vsphere";
  vsphere: VsphereNodeSettings;
  /** DRS rule over the control-plane VMs: mandatory (hard) or a should-rule. */
  antiAffinity: { mandatory: boolean };
}

/** What the program exports under the `molt` output. */
export interface MoltOutputs {
  schema: number;
  nodes: NodeEntry[];
  endpoints: NodeEndpoint[];
  sshUser: string;
  /** Pointer to the load balancer in front of the API servers. */
  apiEndpoint: string;
}

export function buildProgram(input: ProgramInput): () => Promise<Record<string, unknown>> {
  return async () => (input.provider === "lab" ? labProgram(input) : cloudProgram(input));
}

function labProgram(input: LabProgramInput): Record<string, unknown> {
  const clientKey = new SshKeyPair("ssh-client-key", { comment: `molt@${pulumi.getStack()}` });
  const lbInputs = {
    lab: input.lab.lab,
    labRoot: input.lab.labRoot,
    bridge: input.lab.bridge,
    subnet: input.lab.subnet,
    port: input.lab.lbPort,
  };
  const lb = new LabLoadBalancer("api-lb", lbInputs);

  const built: LabControlPlaneNode[] = [];
  for (const entry of input.nodes) {
    // Join through the oldest other node: when molt surges, every existing node has
    // passed preflight, so it is healthy. For existing nodes these inputs are ignored.
    const others = built.filter((_, i) => input.nodes[i].name !== entry.name);
    const seed = others[0];
    const node = new LabControlPlaneNode(
      entry.name,
      {
        entry,
        lab: input.lab,
        lb: lbInputs,
        sshUser: input.sshUser,
        sshPrivateKey: clientKey.privateKey,
        sshPublicKey: clientKey.publicKey,
        seed,
        after: built[built.length - 1],
        joinEndpoints: others.map((o) => pulumi.interpolate`https://${o.privateAddress}:2379`),
        deadlineSeconds: input.joinDeadlineSeconds,
      },
      { dependsOn: [lb] },
    );
    built.push(node);
  }
  return { molt: moltOutput(input.nodes, built, input.sshUser, lb.address), sshPrivateKey: clientKey.privateKey };
}

interface CloudNode extends ControlPlaneNodeOutputs {
  connection: pulumi.Output<ConnectionArgs>;
  bootstrap: RemoteCommand;
}

function cloudProgram(input: AwsProgramInput | AzureProgramInput | VsphereProgramInput): Record<string, unknown> {
  const privateKey = clientPrivateKey();
  // The public half is not secret; keeping it plain keeps it out of secret-only diffs.
  const ssh: SshSettings = {
    user: input.ssh.user,
    privateKey,
    publicKey: pulumi.unsecret(privateKey.apply(publicKeyOfPrivateKey)),
    ...(input.ssh.port ? { port: input.ssh.port } : {}),
  };

  const built: CloudNode[] = [];
  for (const entry of input.nodes) {
    // Host keys are made ahead of the machine (cloud-init installs them) and never
    // change, so every connection, the first one included, is pinned.
    const hostKey = new SshKeyPair(`${entry.name}-hostkey`, { comment: `host key of ${entry.name}` });
    // Join through the oldest other node, after the node before (one join at a time);
    // as in the lab, for existing nodes these inputs change nothing. New nodes are only
    // ever appended to a non-empty list, so a non-init node with no node before it is
    // an existing one: the survivor of a 1-replica roll, which joined long ago.
    const seed = built[0];
    const args: NodeArgs = {
      node: entry,
      ssh,
      hostKey: { privateKey: hostKey.privateKey, publicKey: hostKey.publicKey },
      bootstrap: input.bootstrap,
      ...(entry.init ? {} : seed ? { seed: seed.connection } : { joinedAlready: true }),
      ...(built.length ? { after: built[built.length - 1].bootstrap } : {}),
    };
    built.push(cloudNode(input, entry, args));
  }
  if (input.provider === "vsphere") {
    new VsphereControlPlaneAntiAffinity("control-plane-anti-affinity", {
      clusterName: input.bootstrap.clusterName ?? "kubernetes",
      nodes: built as VsphereControlPlaneNode[],
      mandatory: input.antiAffinity.mandatory,
    });
  }
  return {
    molt: moltOutput(input.nodes, built, input.ssh.user, pulumi.output(input.bootstrap.controlPlaneEndpoint)),
    sshPrivateKey: privateKey,
  };
}

type NodeArgs = Omit<CloudControlPlaneNodeArgs<unknown>, "settings">;

function cloudNode(
  input: AwsProgramInput | AzureProgramInput | VsphereProgramInput,
  entry: NodeEntry,
  args: NodeArgs,
): CloudNode {
  switch (input.provider) {
    case "aws":
      return new AwsControlPlaneNode(entry.name, { ...args, settings: input.aws });
    case "azure":
      return new AzureControlPlaneNode(entry.name, { ...args, settings: input.azure });
    case "vsphere":
      return new VsphereControlPlaneNode(entry.name, { ...args, settings: input.vsphere });
  }
}

/** The stack's secret `molt:ssh.privateKey` (orchestrator/config.ts checked it is one). */
function clientPrivateKey(): pulumi.Output<string> {
  return new pulumi.Config("molt").requireSecretObject<{ privateKey?: unknown }>("ssh").apply((s) => {
    if (typeof s.privateKey !== "string" || s.privateKey.trim() === "") {
      throw new Error(
        "molt:ssh.privateKey is not set: `pulumi config set --secret --path 'molt:ssh.privateKey' < KEYFILE` (see stacks/Pulumi.aws.yaml)",
      );
    }
    return s.privateKey;
  });
}

function moltOutput(
  nodes: NodeEntry[],
  built: ControlPlaneNodeOutputs[],
  sshUser: string,
  apiEndpoint: pulumi.Input<string>,
): pulumi.Output<MoltOutputs> {
  const endpoints = pulumi.all(
    built.map((n, i) =>
      pulumi
        .all([n.privateAddress, n.sshHost, n.sshPort, n.hostPublicKey, n.providerId])
        .apply(([privateAddress, sshHost, sshPort, hostPublicKey, providerId]): NodeEndpoint => ({
          name: nodes[i].name,
          privateAddress,
          sshHost,
          sshPort,
          hostPublicKey,
          providerId,
        })),
    ),
  );
  return pulumi.all([endpoints, apiEndpoint]).apply(([eps, api]): MoltOutputs => ({
    schema: NODE_LIST_SCHEMA,
    nodes,
    endpoints: eps,
    sshUser,
    apiEndpoint: api,
  }));
}
