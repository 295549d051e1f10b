// Runtime of AzureBackendPoolMembership (pool-membership.ts), loaded by the dynamic provider
// from molt's dist/ (infra/dynamic.ts). An adopted VM's place in the API backend pool is a
// property of its owner's NIC (KubeOne: azurerm_network_interface_backend_address_pool_association),
// which no Pulumi resource of molt's can hold without owning the NIC. So molt reads and edits
// that one property through Azure Resource Manager itself:
//  - create: the VM's primary NIC must already hold the pool (adoption changes nothing);
//  - delete: the pool is removed from the NIC's IP configurations (GET, then PUT of the same
//    NIC with If-Match on its ETag, so a concurrent change by the owner is never overwritten),
//    and molt waits until the NIC's provisioning has succeeded.
// Credentials: DefaultAzureCredential (AZURE_* environment, workload or managed identity, the
// Azure CLI), the public Azure cloud's Resource Manager.
import type { TokenCredential } from "@azure/identity";

export const NETWORK_API_VERSION = "2024-05-01";
export const COMPUTE_API_VERSION = "2024-07-01";
const ARM = "https://management.azure.com";

export interface MembershipInputs {
  vmId: string;
  backendPoolId: string;
}

export interface MembershipOutputs extends MembershipInputs {
  nicId: string;
  /** The NIC's IP configurations that held the pool when the node was recorded. */
  ipConfigurations: string[];
}

/** A resource as ARM returns it: what molt reads of a VM and a NIC, the rest carried as it came. */
export interface ArmResource {
  id?: string;
  etag?: string;
  properties?: {
    provisioningState?: string;
    networkProfile?: { networkInterfaces?: Array<{ id?: string; properties?: { primary?: boolean } }> };
    ipConfigurations?: Array<{
      name?: string;
      properties?: { loadBalancerBackendAddressPools?: Array<{ id?: string }> } & Record<string, unknown>;
    }>;
  } & Record<string, unknown>;
  [k: string]: unknown;
}

/** What molt asks of Azure Resource Manager (a fake in the unit tests). */
export interface Arm {
  /** The resource, or undefined when it does not exist (404). */
  get(id: string, apiVersion: string): Promise<ArmResource | undefined>;
  /** PUT of the whole resource, only if it still has ETag `etag`. */
  put(id: string, apiVersion: string, body: ArmResource, etag: string | undefined): Promise<void>;
}

export class ArmError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = "ArmError";
  }
}

const sameId = (a: string | undefined, b: string) => (a ?? "").toLowerCase() === b.toLowerCase();

/** The VM's primary NIC (its only one, or the one marked primary). */
export async function primaryNicOf(arm: Arm, vmId: string): Promise<string> {
  const vm = await arm.get(vmId, COMPUTE_API_VERSION);
  if (!vm) throw new Error(`VM ${vmId} does not exist`);
  const nics = vm.properties?.networkProfile?.networkInterfaces ?? [];
  const nic = nics.length === 1 ? nics[0] : nics.find((n) => n.properties?.primary);
  if (!nic?.id) throw new Error(`VM ${vmId} has no primary network interface`);
  return nic.id;
}

/** Names of the NIC's IP configurations that are in the pool. */
export function configurationsInPool(nic: ArmResource, poolId: string): string[] {
  return (nic.properties?.ipConfigurations ?? [])
    .filter((c) => (c.properties?.loadBalancerBackendAddressPools ?? []).some((p) => sameId(p.id, poolId)))
    .map((c) => c.name ?? "");
}

/** The NIC without the pool in any IP configuration (every other property as it was). */
export function withoutPool(nic: ArmResource, poolId: string): ArmResource {
  return {
    ...nic,
    properties: {
      ...nic.properties,
      ipConfigurations: (nic.properties?.ipConfigurations ?? []).map((c) => ({
        ...c,
        properties: {
          ...c.properties,
          loadBalancerBackendAddressPools: (c.properties?.loadBalancerBackendAddressPools ?? []).filter(
            (p) => !sameId(p.id, poolId),
          ),
        },
      })),
    },
  };
}

/** create: the VM's NIC is in the pool already; what holds it is recorded, nothing is changed. */
export async function verifyMembership(arm: Arm, inputs: MembershipInputs): Promise<MembershipOutputs> {
  const nicId = await primaryNicOf(arm, inputs.vmId);
  const nic = await arm.get(nicId, NETWORK_API_VERSION);
  if (!nic) throw new Error(`network interface ${nicId} of VM ${inputs.vmId} does not exist`);
  const ipConfigurations = configurationsInPool(nic, inputs.backendPoolId);
  if (ipConfigurations.length === 0)
    throw new Error(
      `VM ${inputs.vmId} is not in backend pool ${inputs.backendPoolId} (its NIC ${nicId} holds no IP ` +
        "configuration in it): molt:azure.apiBackendPoolId does not name this cluster's API load balancer pool",
    );
  return { ...inputs, nicId, ipConfigurations };
}

export interface WaitOptions {
  deadlineMs: number;
  pollMs: number;
  sleep?: (ms: number) => Promise<void>;
  now?: () => number;
}

const DEFAULT_WAIT: WaitOptions = { deadlineMs: 300_000, pollMs: 2_000 };

/**
 * delete: the NIC leaves the pool, and molt waits until Azure has applied it. A NIC (or VM)
 * that is gone has left it already. Returns whether anything was changed.
 */
export async function leavePool(
  arm: Arm,
  props: MembershipOutputs,
  wait: WaitOptions = DEFAULT_WAIT,
): Promise<boolean> {
  const nic = await arm.get(props.nicId, NETWORK_API_VERSION);
  if (!nic || configurationsInPool(nic, props.backendPoolId).length === 0) return false;
  await arm.put(props.nicId, NETWORK_API_VERSION, withoutPool(nic, props.backendPoolId), nic.etag);
  const sleep = wait.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const now = wait.now ?? Date.now;
  const until = now() + wait.deadlineMs;
  for (;;) {
    const seen = await arm.get(props.nicId, NETWORK_API_VERSION);
    const state = seen?.properties?.provisioningState;
    if (!seen || (state === "Succeeded" && configurationsInPool(seen, props.backendPoolId).length === 0)) return true;
    if (state === "Failed")
      throw new Error(`network interface ${props.nicId}: Azure failed to apply its removal from the backend pool`);
    if (now() >= until)
      throw new Error(
        `network interface ${props.nicId} still in backend pool ${props.backendPoolId} (provisioning ` +
          `${state ?? "unknown"}) after ${Math.round(wait.deadlineMs / 1000)} s`,
      );
    await sleep(wait.pollMs);
  }
}

/** Azure Resource Manager over HTTPS with a bearer token. */
export function armClient(
  credential: TokenCredential,
  endpoint = ARM,
  wait: WaitOptions = { deadlineMs: 60_000, pollMs: 1_000 },
): Arm & { post(id: string, apiVersion: string): Promise<unknown> } {
  const call = async (
    method: "GET" | "PUT" | "POST",
    id: string,
    apiVersion: string,
    body?: unknown,
    etag?: string,
    url = `${endpoint}${id}?api-version=${apiVersion}`,
  ) => {
    const token = await credential.getToken(`${endpoint}/.default`);
    if (!token) throw new Error("no Azure credential: sign in (az login) or set AZURE_CLIENT_ID and friends");
    const res = await fetch(url, {
      method,
      headers: {
        authorization: `Bearer ${token.token}`,
        ...(body !== undefined ? { "content-type": "application/json" } : {}),
        ...(etag ? { "if-match": etag } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      signal: AbortSignal.timeout(60_000),
    });
    const text = await res.text();
    return { status: res.status, text, location: res.headers.get("location") ?? undefined };
  };
  const failed = (what: string, r: { status: number; text: string }) => {
    let detail = r.text.slice(0, 300);
    try {
      const e = (JSON.parse(r.text) as { error?: { code?: string; message?: string } }).error;
      if (e) detail = `${e.code ?? ""}: ${e.message ?? ""}`;
    } catch {
      /* not JSON: the text as it came */
    }
    return new ArmError(r.status, `${what}: HTTP ${r.status} ${detail}`);
  };
  return {
    async get(id, apiVersion) {
      const r = await call("GET", id, apiVersion);
      if (r.status === 404) return undefined;
      if (r.status !== 200) throw failed(`reading ${id}`, r);
      return JSON.parse(r.text) as ArmResource;
    },
    async put(id, apiVersion, body, etag) {
      const r = await call("PUT", id, apiVersion, body, etag);
      if (r.status === 412) throw failed(`${id} was changed by someone else while molt edited it; run again`, r);
      if (r.status !== 200 && r.status !== 201) throw failed(`writing ${id}`, r);
    },
    // An action (the rule health API): 200 answers at once; 202 names where the answer will be.
    async post(id, apiVersion) {
      let r = await call("POST", id, apiVersion);
      const until = Date.now() + wait.deadlineMs;
      while (r.status === 202 && r.location) {
        if (Date.now() >= until) throw failed(`${id}: no answer within ${wait.deadlineMs / 1000}s`, r);
        await new Promise((ok) => setTimeout(ok, wait.pollMs));
        r = await call("GET", id, apiVersion, undefined, undefined, r.location);
      }
      if (r.status !== 200) throw failed(`calling ${id}`, r);
      return JSON.parse(r.text) as unknown;
    },
  };
}

async function defaultArm(): Promise<Arm> {
  const { DefaultAzureCredential } = await import("@azure/identity");
  return armClient(new DefaultAzureCredential());
}

/** The dynamic provider's create. */
export async function createMembership(inputs: MembershipInputs): Promise<{ id: string; outs: MembershipOutputs }> {
  const outs = await verifyMembership(await defaultArm(), inputs);
  return { id: `${outs.nicId}|${inputs.backendPoolId}`, outs };
}

/** The dynamic provider's delete. */
export async function deleteMembership(props: MembershipOutputs): Promise<void> {
  await leavePool(await defaultArm(), props);
}
