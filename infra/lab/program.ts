// The lab's stack program: a generated client key, the lab load balancer (or an adopted
// cluster's own), and one lab node per entry of the node list, each joining through the
// oldest other node; adopted entries get only a record (infra/adopted.ts).
import type { HostFileCarry } from "../../orchestrator/core/model";
import * as pulumi from "@pulumi/pulumi";
import { hostFilesFor, joinsInThisUpdate } from "../node";
import { type NodeEntry } from "../../orchestrator/core/nodes";
import { moltOutput } from "../outputs";
import { SshKeyPair } from "../remote/keypair";
import type { SshAccessSettings } from "../../orchestrator/core/nodes";
import { adoptedNode, type AdoptedNodeOutputs } from "../adopted";
import { LabImportedMachine } from "./imported-machine";
import { parseSubnet } from "./host";
import { LabLoadBalancer, labLbInputs } from "./lb";
import { LabControlPlaneNode } from "./node";
import { type LabSettings } from "./settings";

export interface LabProgramInput {
  provider: "lab";
  nodes: NodeEntry[];
  sshUser: string;
  /** molt:ssh.agent and molt:ssh.bastion. */
  sshAccess?: SshAccessSettings;
  lab: LabSettings;
  joinDeadlineSeconds: number;
  /** The nodes this update may create (infra/node.ts joinsInThisUpdate); absent: any. */
  joining?: string[];
  /** The cluster's host files for the nodes that join, and the node they are copied from. */
  hostFiles?: HostFileCarry;
  /** molt:encryptionAtRest: a new cluster encrypts Secrets in etcd. */
  encryptionAtRest?: boolean;
}

export function labProgram(input: LabProgramInput): Record<string, unknown> {
  const clientKey = new SshKeyPair("ssh-client-key", { comment: `molt@${pulumi.getStack()}` });
  // An adopted cluster's own load balancer (molt:lab.loadBalancer), or molt's; in VIP mode
  // keepalived in the machines is the endpoint and no HAProxy is made.
  const named = input.lab.loadBalancer;
  const vip = input.lab.vip;
  const lbInputs = labLbInputs(
    input.lab,
    input.nodes.some((n) => n.kubernetesVersion !== undefined),
  );
  const lb = vip || named ? undefined : new LabLoadBalancer("api-lb", lbInputs);
  const lbEndpoint = vip
    ? `${vip.address}:6443`
    : (named?.address ?? `${parseSubnet(input.lab.subnet).gateway}:${input.lab.lbPort}`);

  const built: (LabControlPlaneNode | AdoptedNodeOutputs)[] = [];
  for (const entry of input.nodes) {
    if (entry.adopted) {
      const imported = entry.adopted.machine;
      const machine = imported
        ? new LabImportedMachine(`${entry.name}-machine`, {
            lab: input.lab.lab,
            labRoot: input.lab.labRoot,
            subnet: input.lab.subnet,
            name: imported.importId,
            hostPublicKey: entry.adopted.hostKey,
          })
        : undefined;
      built.push(adoptedNode(entry, { privateKey: clientKey.privateKey, access: input.sshAccess }, machine));
      continue;
    }
    // Join through the oldest other node: when molt surges, every existing node has
    // passed preflight, so it is healthy. A node that joined already gets no join inputs.
    const joins = joinsInThisUpdate(input.joining, entry.name);
    const others = joins ? built.filter((_, i) => input.nodes[i].name !== entry.name) : [];
    const seed = others[0];
    const node = new LabControlPlaneNode(
      entry.name,
      {
        entry,
        lab: input.lab,
        ...(vip ? {} : { lb: lbInputs }),
        lbEndpoint,
        sshUser: input.sshUser,
        ...(input.sshAccess ? { sshAccess: input.sshAccess } : {}),
        sshPrivateKey: clientKey.privateKey,
        sshPublicKey: clientKey.publicKey,
        seed,
        ...(joins ? hostFilesFor(input, built) : {}),
        ...(input.encryptionAtRest ? { encryptionAtRest: true } : {}),
        after: joins ? built[built.length - 1] : undefined,
        joinEndpoints: others.map((o) => pulumi.interpolate`https://${o.privateAddress}:2379`),
        deadlineSeconds: input.joinDeadlineSeconds,
      },
      { dependsOn: lb ? [lb] : [] },
    );
    built.push(node);
  }
  return {
    molt: moltOutput(input.nodes, built, input.sshUser, lb ? lb.address : lbEndpoint),
    sshPrivateKey: clientKey.privateKey,
  };
}
