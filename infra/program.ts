// The Pulumi program molt runs inline: one ControlPlaneNode per entry of the node list,
// plus the cluster-wide pieces of the provider. It also writes the node list back into
// the stack outputs, which is where molt reads it from: the list lives with the state.
import * as pulumi from "@pulumi/pulumi";
import type { NodeEndpoint, NodeEntry } from "./node";
import { LabLoadBalancer } from "./lab/lb";
import { LabControlPlaneNode, type LabSettings } from "./lab/node";
import { SshKeyPair } from "./remote/keypair";

export const NODE_LIST_SCHEMA = 1;

export interface ProgramInput {
  provider: "lab";
  nodes: NodeEntry[];
  sshUser: string;
  lab: LabSettings;
  joinDeadlineSeconds: number;
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
  return async () => {
    const clientKey = new SshKeyPair("ssh-client-key", { comment: `molt@${pulumi.getStack()}` });
    const lbInputs = { lab: input.lab.lab, labRoot: input.lab.labRoot, bridge: input.lab.bridge, subnet: input.lab.subnet, port: input.lab.lbPort };
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

    const endpoints = pulumi.all(
      built.map((n, i) =>
        pulumi.all([n.privateAddress, n.sshHost, n.sshPort, n.hostPublicKey, n.providerId]).apply(
          ([privateAddress, sshHost, sshPort, hostPublicKey, providerId]): NodeEndpoint => ({
            name: input.nodes[i].name,
            privateAddress,
            sshHost,
            sshPort,
            hostPublicKey,
            providerId,
          }),
        ),
      ),
    );
    const molt = pulumi.all([endpoints, lb.address]).apply(
      ([eps, api]): MoltOutputs => ({ schema: NODE_LIST_SCHEMA, nodes: input.nodes, endpoints: eps, sshUser: input.sshUser, apiEndpoint: api }),
    );
    return { molt, sshPrivateKey: clientKey.privateKey };
  };
}
