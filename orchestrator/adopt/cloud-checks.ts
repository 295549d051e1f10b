// The cloud checks of adoption, over what the probe read on each host (probe.ts): the
// kubelets' --cloud-provider must be what molt gives its own nodes (molt:bootstrap.cloudProvider),
// and where molt takes adopted nodes out of a cloud load balancer when it retires them, it must
// know each one's machine (its metadata service's identity, or the machine named with --import).
import type { AdoptionHost } from "./input";
import type { HostFacts } from "./probe";

/** The kubelets agree on --cloud-provider, and the stack gives molt's nodes the same. */
export function kubeletCloudProviderProblems(
  hosts: readonly AdoptionHost[],
  facts: ReadonlyMap<AdoptionHost, HostFacts>,
  configured: string | undefined,
  file: string,
): string[] {
  const seen = hosts
    .filter((h) => facts.get(h)?.kubelet)
    .map((h) => ({ host: h.address, value: facts.get(h)!.kubelet!.cloudProvider ?? "" }));
  const shown = (v: string) => (v ? `--cloud-provider=${v}` : "no --cloud-provider");
  const values = [...new Set(seen.map((s) => s.value))];
  if (values.length > 1)
    return [
      `the kubelets disagree: ${seen.map((s) => `${s.host} runs ${shown(s.value)}`).join(", ")} ` +
        "(/var/lib/kubelet/kubeadm-flags.env): make them agree before molt adds nodes",
    ];
  const value = values[0];
  if (value === undefined || value === (configured ?? "")) return [];
  if (value === "external")
    return [
      "the kubelets run with --cloud-provider=external (a cloud controller manager initialises their Nodes): set " +
        `molt:bootstrap.cloudProvider: external in ${file}, so molt's nodes do too`,
    ];
  if (value === "")
    return [
      `molt:bootstrap.cloudProvider is ${configured} in ${file}, but the kubelets run without --cloud-provider: ` +
        "molt's nodes would wait for a cloud controller manager the cluster may not run (tainted uninitialized). " +
        "Remove the key, or run the cluster's nodes with it first",
    ];
  return [
    `the kubelets run with --cloud-provider=${value}, an in-tree provider (gone since Kubernetes 1.31): molt's ` +
      "nodes run with external or none. Move the cluster to an external cloud controller manager first",
  ];
}

/**
 * Each host's machine as the cloud's controller names it: its metadata service's identity, checked
 * against the machine named with --import; `needed`: the stack's load balancer will need it.
 */
export function machineIdentities(
  hosts: readonly AdoptionHost[],
  facts: ReadonlyMap<AdoptionHost, HostFacts>,
  imports: ReadonlyMap<AdoptionHost, string>,
  needed: boolean,
): { providerIds: Map<AdoptionHost, string>; problems: string[] } {
  const providerIds = new Map<AdoptionHost, string>();
  const problems: string[] = [];
  for (const h of hosts) {
    const providerId = facts.get(h)?.providerId;
    const imported = imports.get(h);
    if (providerId && imported && !providerId.toLowerCase().endsWith(imported.toLowerCase()))
      problems.push(
        `--import ${h.address}=${imported}: the host's metadata service says it is ${providerId}; name its own machine`,
      );
    else if (providerId) providerIds.set(h, providerId);
    else if (needed && !imported)
      problems.push(
        `host ${h.address}: its cloud metadata service (169.254.169.254) did not say which machine it is; molt ` +
          "needs that to take the node out of the API load balancer when it retires it. Check that the host " +
          "reaches it (on AWS: IMDS enabled, hop limit 1 or more), or name the machine with --import " +
          `${h.address}=ID (molt then destroys it when it retires the node)`,
      );
  }
  return { providerIds, problems };
}
