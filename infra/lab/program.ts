// The lab's stack program: a generated client key, the lab load balancer, and one lab
// node per entry of the node list, each joining through the oldest other node.
import * as pulumi from "@pulumi/pulumi";
import type { NodeEntry } from "../node";
import { moltOutput } from "../outputs";
import { SshKeyPair } from "../remote/keypair";
import { LabLoadBalancer } from "./lb";
import { LabControlPlaneNode, type LabSettings } from "./node";

export interface LabProgramInput {
  provider: "lab";
  nodes: NodeEntry[];
  sshUser: string;
  lab: LabSettings;
  joinDeadlineSeconds: number;
}

export function labProgram(input: LabProgramInput): Record<string, unknown> {
  const clientKey = new SshKeyPair("ssh-client-key", { comment: `molt@${pulumi.getStack()}` });
  const lbInputs = {
    lab: input.lab.lab,
    labRoot: input.lab.labRoot,
    bridge: input.lab.bridge,
    subnet: input.lab.subnet,
    port: input.lab.lbPort,
  };
  // VIP mode: keepalived in the machines is the endpoint; the lab's HAProxy is not made.
  const vip = input.lab.vip;
  const lb = vip ? undefined : new LabLoadBalancer("api-lb", lbInputs);

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
        ...(lb ? { lb: lbInputs } : {}),
        sshUser: input.sshUser,
        sshPrivateKey: clientKey.privateKey,
        sshPublicKey: clientKey.publicKey,
        seed,
        after: built[built.length - 1],
        joinEndpoints: others.map((o) => pulumi.interpolate`https://${o.privateAddress}:2379`),
        deadlineSeconds: input.joinDeadlineSeconds,
      },
      { dependsOn: lb ? [lb] : [] },
    );
    built.push(node);
  }
  const apiEndpoint = lb ? lb.address : `${vip!.address}:6443`;
  return { molt: moltOutput(input.nodes, built, input.sshUser, apiEndpoint), sshPrivateKey: clientKey.privateKey };
}
