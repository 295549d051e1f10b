// The stack program of every cloud: one pinned host key and one provider component per
// entry of the node list, the provider's cluster-wide resources, and the `molt` output.
// The provider supplies only what differs (infra/providers/provider.ts).
import * as pulumi from "@pulumi/pulumi";
import { hostFilesFor, joinsInThisUpdate, type SshSettings } from "../node";
import { moltOutput } from "../outputs";
import { SshKeyPair } from "../remote/keypair";
import { adoptedNode, type AdoptedNodeOutputs } from "../adopted";
import { publicKeyOfPrivateKey } from "./cloud-common";
import type { CloudControlPlaneNode, CloudNodeArgs } from "./cloud-node";
import type { CloudConfigBase, CloudProgramInput, CloudProviderDefinition, RegisteredCloudProvider } from "./provider";

/** A cloud provider's definition as the registry holds it (its program typed by it). */
export function cloudProvider<C extends CloudConfigBase & { provider: string }, S = undefined>(
  def: CloudProviderDefinition<C, S>,
): RegisteredCloudProvider<C> {
  const own = (cloud: CloudConfigBase & { provider: string }): C => {
    if (cloud.provider !== def.kind) throw new Error(`internal: ${cloud.provider} settings given to ${def.kind}`);
    return cloud as C;
  };
  return {
    family: "cloud",
    kind: def.kind,
    sections: def.sections,
    plugins: def.plugins,
    clusterWideTypes: def.clusterWideTypes,
    importIdProblem: (id) => def.importIdProblem(id),
    imageProblem: (image) => def.imageProblem(image),
    domains: (sections) => def.domains(sections),
    config: (sections, common) => def.config(sections, common),
    problems: (cloud) => def.problems?.(own(cloud)) ?? [],
    program: (input) => cloudProgram(def, { ...input, cloud: own(input.cloud) }),
  };
}

function cloudProgram<C extends CloudConfigBase & { provider: string }, S>(
  def: CloudProviderDefinition<C, S>,
  input: CloudProgramInput<C>,
): Record<string, unknown> {
  const cloud = input.cloud;
  const privateKey = clientPrivateKey();
  // The public half is not secret; keeping it plain keeps it out of secret-only diffs.
  const ssh: SshSettings = {
    user: cloud.ssh.user,
    privateKey,
    publicKey: pulumi.unsecret(privateKey.apply(publicKeyOfPrivateKey)),
    ...(cloud.ssh.port ? { port: cloud.ssh.port } : {}),
    ...(input.sshAccess ? { access: input.sshAccess } : {}),
  };
  const shared = def.shared?.(cloud) as S;

  const built: (CloudControlPlaneNode | AdoptedNodeOutputs)[] = [];
  for (const entry of input.nodes) {
    if (entry.adopted) {
      const imported = entry.adopted.machine;
      const machine = imported ? def.importMachine(`${entry.name}-machine`, imported.importId, cloud) : undefined;
      built.push(adoptedNode(entry, { privateKey, access: input.sshAccess }, machine));
      continue;
    }
    // Host keys are made ahead of the machine (cloud-init installs them), so every
    // connection, the first one included, is pinned; the bootstrap then rotates the key.
    const hostKey = new SshKeyPair(`${entry.name}-hostkey`, { comment: `host key of ${entry.name}` });
    // Join through the oldest other node, after the node before (one join at a time),
    // only when this update may create the node (infra/node.ts joinsInThisUpdate). New
    // nodes are only ever appended to a non-empty list, so a non-init node with no node
    // before it is an existing one: the survivor of a 1-replica roll, which joined long ago.
    const joins = joinsInThisUpdate(input.joining, entry.name);
    const seed = joins ? built[0] : undefined;
    const before = joins ? built[built.length - 1]?.bootstrap : undefined;
    const args: CloudNodeArgs = {
      node: entry,
      ssh,
      hostKey: { privateKey: hostKey.privateKey, publicKey: hostKey.publicKey },
      bootstrap: cloud.bootstrap,
      ...(entry.init ? {} : seed ? { seed: seed.connection } : { joinedAlready: true }),
      ...(joins ? hostFilesFor(input, built) : {}),
      ...(before ? { after: before } : {}),
    };
    built.push(def.node(entry, args, cloud, shared));
  }
  def.cluster?.(
    cloud,
    built.filter((n): n is CloudControlPlaneNode => n.bootstrap !== undefined),
  );
  return {
    molt: moltOutput(input.nodes, built, cloud.ssh.user, pulumi.output(cloud.bootstrap.controlPlaneEndpoint)),
    sshPrivateKey: privateKey,
  };
}

/** The stack's secret `molt:ssh.privateKey` (orchestrator/config.ts checked it is one). */
function clientPrivateKey(): pulumi.Output<string> {
  return new pulumi.Config("molt").requireSecretObject<{ privateKey?: unknown }>("ssh").apply((s) => {
    if (typeof s.privateKey !== "string" || s.privateKey.trim() === "") {
      throw new Error(
        "molt:ssh.privateKey is not set: `pulumi config set --secret --path 'molt:ssh.privateKey' < KEYFILE` " +
          "(see stacks/Pulumi.aws.yaml)",
      );
    }
    return s.privateKey;
  });
}
