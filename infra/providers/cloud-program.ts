// The stack program of every cloud: one pinned host key and one provider component per
// entry of the node list, the provider's cluster-wide resources, and the `molt` output.
// The provider supplies only what differs (infra/providers/provider.ts).
import * as pulumi from "@pulumi/pulumi";
import { hostFilesFor, joinsInThisUpdate, type SshSettings } from "../node";
import { moltOutput, type MoltOutputs } from "../outputs";
import { SshKeyPair } from "../remote/keypair";
import { adoptedNode, type AdoptedNodeOutputs } from "../adopted";
import { publicKeyOfPrivateKey } from "./cloud-common";
import { checkEndpoint, endpointCheckError } from "./api-load-balancer";
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
    adoptedRelease: (entry, cloud) => def.adoptedRelease?.(entry, own(cloud)),
    checksEndpoint: def.apiLoadBalancer !== undefined,
    attachesAdopted: def.adoptedAttachment !== undefined,
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
      def.adoptedAttachment?.(entry, cloud, machine);
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
  const molt = moltOutput(input.nodes, built, cloud.ssh.user, pulumi.output(cloud.bootstrap.controlPlaneEndpoint));
  return { molt: endpointChecked(def, input, molt), sshPrivateKey: privateKey };
}

/**
 * `molt adopt`'s endpoint check (infra/providers/api-load-balancer.ts): the `molt` output
 * waits for it, so a load balancer that does not serve the endpoint fails the program, in
 * the preview adoption runs before anything is recorded.
 */
function endpointChecked<C extends CloudConfigBase & { provider: string }, S>(
  def: CloudProviderDefinition<C, S>,
  input: CloudProgramInput<C>,
  output: pulumi.Output<MoltOutputs>,
): pulumi.Output<MoltOutputs> {
  const check = input.endpointCheck;
  if (!check || !def.apiLoadBalancer) return output;
  const verdict = def
    .apiLoadBalancer(
      input.cloud,
      input.nodes.filter((n) => n.adopted),
    )
    .apply(async (lb) => {
      const problems = await checkEndpoint(check, lb);
      if (problems.length) throw endpointCheckError(problems);
      return lb.name;
    });
  return pulumi.all([output, verdict]).apply(([o]): MoltOutputs => o);
}

/** The stack's secret `molt:ssh.privateKey` (orchestrator/config/index.ts checked it is one). */
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
