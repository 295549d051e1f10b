// Nodes molt did not create (`molt adopt`). They stay in the node list until retired, so the
// planner sees them and joins new nodes through them, but the program makes no resource for
// them: their endpoint and connection are what adoption checked and recorded.
import * as pulumi from "@pulumi/pulumi";
import type { ControlPlaneNodeOutputs } from "./node";
import type { NodeEndpoint, NodeEntry } from "../orchestrator/core/nodes";
import { accessInputs } from "./remote/access";
import { type SshAccessSettings } from "../orchestrator/core/nodes";
import type { ConnectionArgs } from "./remote/command";

export const ADOPTED_IMAGE = "adopted";

export function adoptedEndpoint(entry: NodeEntry): NodeEndpoint {
  const a = entry.adopted;
  if (!a) throw new Error(`internal: ${entry.name} is not an adopted node`);
  return {
    name: entry.name,
    privateAddress: a.address,
    sshHost: a.ssh.host,
    sshPort: a.ssh.port,
    hostPublicKey: a.hostKey,
    providerId: a.providerId ?? `adopted://${entry.name}`,
    sshUser: a.ssh.user,
  };
}

/** An adopted node as the program's other nodes see it: outputs and a pinned connection, no resource. */
export interface AdoptedNodeOutputs extends ControlPlaneNodeOutputs {
  connection: pulumi.Output<ConnectionArgs>;
  /** Adopted nodes have no bootstrap resource: they joined long ago. */
  bootstrap?: undefined;
}

/**
 * The record of an adopted node in the state: no machine, no provider call, nothing done on
 * delete (the machine is not molt's). It exists so that what the program builds on an
 * adopted node (the join material of a node that joined through it) depends on it in the
 * state, and a targeted update that drops the node re-registers those dependents too.
 */
export class AdoptedNodeRecord extends pulumi.dynamic.Resource {
  declare readonly endpoint: pulumi.Output<NodeEndpoint>;
  constructor(name: string, args: { endpoint: NodeEndpoint }, opts?: pulumi.CustomResourceOptions) {
    super(recordProvider, name, args, opts, "molt", "AdoptedNode");
  }
}

const recordProvider: pulumi.dynamic.ResourceProvider = {
  async create(inputs: { endpoint: NodeEndpoint }) {
    return { id: `adopted/${inputs.endpoint.name}`, outs: inputs };
  },
  async diff() {
    return { changes: false };
  },
};

/**
 * An adopted node in the program. `machine` is its machine when `molt adopt --import` took
 * it into the stack: the record depends on it, so a targeted update that drops the node
 * deletes the record first, then the machine.
 */
export function adoptedNode(
  entry: NodeEntry,
  ssh: { privateKey?: pulumi.Input<string>; access?: SshAccessSettings },
  machine?: pulumi.Resource,
): AdoptedNodeOutputs {
  const record = new AdoptedNodeRecord(
    entry.name,
    { endpoint: adoptedEndpoint(entry) },
    machine ? { dependsOn: [machine] } : undefined,
  );
  const ep = record.endpoint;
  return {
    privateAddress: ep.privateAddress,
    sshHost: ep.sshHost,
    sshPort: ep.sshPort,
    hostPublicKey: ep.hostPublicKey,
    providerId: ep.providerId,
    connection: pulumi.output({
      host: ep.sshHost,
      port: ep.sshPort,
      user: ep.apply((e) => e.sshUser!),
      ...(ssh.privateKey ? { privateKey: pulumi.secret(ssh.privateKey) } : {}),
      hostKey: ep.hostPublicKey,
      ...(ssh.privateKey ? accessInputs(ssh.access, ssh.privateKey) : {}),
    }),
  };
}
