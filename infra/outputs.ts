// The `molt` stack output every program exports: the node list (which lives with the state,
// not in a git-tracked file), how each node is reached, and the API endpoint. observe.ts
// reads it back.
import * as pulumi from "@pulumi/pulumi";
import type { ControlPlaneNodeOutputs } from "./node";
import type { NodeEndpoint, NodeEntry } from "../orchestrator/core/nodes";
import { adoptedEndpoint } from "./adopted";

export const NODE_LIST_SCHEMA = 1;

/** What the program exports under the `molt` output. */
export interface MoltOutputs {
  schema: number;
  nodes: NodeEntry[];
  endpoints: NodeEndpoint[];
  sshUser: string;
  /** Pointer to the load balancer in front of the API servers. */
  apiEndpoint: string;
}

export function moltOutput(
  nodes: NodeEntry[],
  built: ControlPlaneNodeOutputs[],
  sshUser: string,
  apiEndpoint: pulumi.Input<string>,
): pulumi.Output<MoltOutputs> {
  const endpoints = pulumi.all(
    built.map((n, i) =>
      nodes[i].adopted
        ? pulumi.output(adoptedEndpoint(nodes[i]))
        : pulumi
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
