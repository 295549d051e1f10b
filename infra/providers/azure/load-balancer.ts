// The Azure API load balancer beyond molt's own nodes (whose NICs carry the backend pool):
// adopted VMs' pool membership (AzureBackendPoolMembership, so their retirement takes their
// NIC out of the pool) and the load balancer as Azure describes it, for adoption's endpoint
// check (infra/providers/api-load-balancer.ts).
import * as pulumi from "@pulumi/pulumi";
import type { NodeEntry } from "../../../orchestrator/core/nodes";
import type { LoadBalancerFacts } from "../api-load-balancer";
import { azureSdk } from "../sdk";
import { backendPoolProblem, parseBackendPoolId, type AzureNodeSettings } from "./config";
import { AzureBackendPoolMembership } from "./pool-membership";

const AZURE_VM =
  /^\/subscriptions\/[^/]+\/resourceGroups\/([^/]+)\/providers\/Microsoft\.Compute\/virtualMachines\/([^/]+)$/i;
const PUBLIC_IP =
  /^\/subscriptions\/[^/]+\/resourceGroups\/([^/]+)\/providers\/Microsoft\.Network\/publicIPAddresses\/([^/]+)$/i;

/** An adopted node's VM: from its provider id (azure:///subscriptions/...), else its imported machine's id. */
export function adoptedVmId(entry: NodeEntry): string | undefined {
  const a = entry.adopted;
  const fromProviderId = a?.providerId?.startsWith("azure://") ? a.providerId.slice("azure://".length) : undefined;
  if (fromProviderId && AZURE_VM.test(fromProviderId)) return fromProviderId;
  return a?.machine && AZURE_VM.test(a.machine.importId) ? a.machine.importId : undefined;
}

export function adoptedAttachment(
  entry: NodeEntry,
  s: AzureNodeSettings,
  machine?: pulumi.Resource,
): pulumi.Resource | undefined {
  const vmId = adoptedVmId(entry);
  if (!vmId) return undefined;
  return new AzureBackendPoolMembership(
    `${entry.name}-api`,
    { vmId, backendPoolId: s.apiBackendPoolId },
    machine ? { dependsOn: [machine] } : {},
  );
}

export function adoptedRelease(entry: NodeEntry): string {
  return adoptedVmId(entry)
    ? "taken out of the API backend pool"
    : "left in the API backend pool: molt did not record its VM when it was adopted; take its NIC out yourself";
}

/** The load balancer as Azure describes it: frontend addresses and names, and which adopted VMs its pool holds. */
export function apiLoadBalancer(s: AzureNodeSettings, adopted: readonly NodeEntry[]): pulumi.Output<LoadBalancerFacts> {
  const network = azureSdk().network;
  const compute = azureSdk().compute;
  return pulumi.output(s.apiBackendPoolId).apply(async (poolId): Promise<LoadBalancerFacts> => {
    const ref = parseBackendPoolId(poolId);
    if (!ref) throw new Error(`molt:azure.apiBackendPoolId: ${backendPoolProblem(poolId)}`);
    const { resourceGroupName, loadBalancerName } = ref;
    const [lb, pool] = await Promise.all([
      network.getLoadBalancer({ resourceGroupName, loadBalancerName }),
      network.getLoadBalancerBackendAddressPool({
        resourceGroupName,
        loadBalancerName,
        backendAddressPoolName: ref.poolName,
      }),
    ]);
    const addresses: string[] = [];
    const dnsNames: string[] = [];
    for (const f of lb.frontendIPConfigurations ?? []) {
      if (f.privateIPAddress) addresses.push(f.privateIPAddress);
      const pip = f.publicIPAddress?.id ? PUBLIC_IP.exec(f.publicIPAddress.id) : null;
      if (pip) {
        const p = await network.getPublicIPAddress({ resourceGroupName: pip[1], publicIpAddressName: pip[2] });
        if (p.ipAddress) addresses.push(p.ipAddress);
        if (p.dnsSettings?.fqdn) dnsNames.push(p.dnsSettings.fqdn);
      }
    }
    // A NIC-based pool lists the IP configurations in it: <nic id>/ipConfigurations/<name>.
    const inPool = (pool.backendIPConfigurations ?? []).map((c) => (c.id ?? "").toLowerCase());
    const members: Record<string, boolean> = {};
    for (const n of adopted) {
      const vmId = adoptedVmId(n);
      const vm = vmId ? AZURE_VM.exec(vmId) : null;
      if (!vm) continue;
      const got = await compute.getVirtualMachine({ resourceGroupName: vm[1], vmName: vm[2] });
      const nics = (got.networkProfile?.networkInterfaces ?? []).map((i) => (i.id ?? "").toLowerCase());
      members[n.name] = nics.some((nic) => inPool.some((c) => c.startsWith(`${nic}/ipconfigurations/`)));
    }
    return { name: `load balancer ${loadBalancerName} (pool ${ref.poolName})`, dnsNames, addresses, members };
  });
}
