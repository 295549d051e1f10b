// The Azure side of leaked-machine detection (core/leaks.ts): the cluster's control-plane VMs
// as Azure Resource Manager lists them in the stack's resource group under the tags every
// molt node carries (infra/providers/cloud-common.ts nodeTags), and their deletion. A VM's
// NIC and OS disk go with it (molt creates both with deleteOption Delete).
// Credentials: DefaultAzureCredential, as the backend-pool provider (pool-membership-impl.ts).
import type { TokenCredential } from "@azure/identity";
import { pause } from "../../lib/poll";
import type { MachineInventory } from "../core/edges";
import { terminateEach, type CloudMachine } from "../core/leaks";
import { COMPUTE_API_VERSION, NETWORK_API_VERSION } from "../../infra/providers/azure/pool-membership-impl";

const ARM = "https://management.azure.com";
/** One request's deadline, and the whole listing's: an ARM endpoint that stops answering must not hold the run. */
const REQUEST_MS = 20_000;
const LIST_MS = 60_000;
/** How long a VM's deletion may take (ARM's async operation). */
const DELETE_MS = 600_000;

export interface AzureInventorySettings {
  subscription: string;
  resourceGroupName: string;
  clusterName: string;
  /** Another Resource Manager endpoint (tests; sovereign clouds). */
  endpoint?: string;
  credential?: TokenCredential;
  /** Bounds of the wait between polls of a deletion (ARM's Retry-After, clamped). */
  pollMs?: { min: number; max: number };
  deleteDeadlineMs?: number;
}

interface ArmVm {
  id?: string;
  tags?: Record<string, string>;
  properties?: {
    provisioningState?: string;
    timeCreated?: string;
    networkProfile?: { networkInterfaces?: Array<{ id?: string; properties?: { primary?: boolean } }> };
  };
}

interface ArmNic {
  properties?: { ipConfigurations?: Array<{ properties?: { primary?: boolean; privateIPAddress?: string } }> };
}

export function azureInventory(s: AzureInventorySettings): MachineInventory {
  const endpoint = (s.endpoint ?? ARM).replace(/\/$/, "");
  const origin = new URL(endpoint).origin;
  const poll = s.pollMs ?? { min: 1_000, max: 30_000 };
  let credential = s.credential;
  const token = async () => {
    if (!credential) {
      const { DefaultAzureCredential } = await import("@azure/identity");
      credential = new DefaultAzureCredential();
    }
    const t = await credential.getToken(`${endpoint}/.default`);
    if (!t) throw new Error("no Azure credential: sign in (az login) or set AZURE_CLIENT_ID and friends");
    return t.token;
  };
  /** One request; the token only ever goes to the Resource Manager endpoint itself. */
  const call = async (method: "GET" | "DELETE", url: string, deadline: AbortSignal) => {
    if (new URL(url).origin !== origin)
      throw new Error(`Azure Resource Manager sent molt to ${url}, outside ${origin}`);
    const res = await fetch(url, {
      method,
      headers: { authorization: `Bearer ${await token()}` },
      signal: AbortSignal.any([deadline, AbortSignal.timeout(REQUEST_MS)]),
    });
    return { status: res.status, headers: res.headers, text: await res.text() };
  };
  const failed = (what: string, r: { status: number; text: string }) =>
    new Error(`${what}: HTTP ${r.status} ${detailOf(r.text)}`);
  const json = <T>(r: { text: string }) => JSON.parse(r.text) as T;

  const rg = `/subscriptions/${s.subscription}/resourceGroups/${s.resourceGroupName}`;
  return {
    where: `azure ${s.subscription}/${s.resourceGroupName}`,
    resourceType: "azure-native:compute:VirtualMachine",
    // ARM returns resource group names in ids in whatever case it keeps them; the state has
    // the id as the create returned it.
    idKey: (id: string) => id.toLowerCase(),
    async list() {
      const deadline = AbortSignal.timeout(LIST_MS);
      const vms: ArmVm[] = [];
      let url: string | undefined =
        `${endpoint}${rg}/providers/Microsoft.Compute/virtualMachines?api-version=${COMPUTE_API_VERSION}`;
      while (url) {
        const r = await call("GET", url, deadline);
        if (r.status !== 200) throw failed(`listing the VMs of resource group ${s.resourceGroupName}`, r);
        const page = json<{ value?: ArmVm[]; nextLink?: string }>(r);
        vms.push(...(page.value ?? []));
        url = page.nextLink || undefined;
      }
      const ours = vms.filter(
        (v) => v.tags?.["molt.io/cluster"] === s.clusterName && v.tags?.["molt.io/role"] === "control-plane",
      );
      return Promise.all(
        ours.map(async (v): Promise<CloudMachine> => {
          const node = v.tags?.["molt.io/node"];
          const address = await addressOf(v, deadline);
          return {
            id: v.id ?? "",
            state: v.properties?.provisioningState ?? "unknown",
            ...(node ? { node } : {}),
            ...(address ? { address } : {}),
            ...(v.properties?.timeCreated ? { launchedAt: v.properties.timeCreated } : {}),
          };
        }),
      );
    },
    async terminate(ids) {
      await terminateEach(`azure ${s.subscription}/${s.resourceGroupName}`, ids, remove);
    },
  };

  /** The private address of the VM's primary NIC (undefined when it has none, or is gone). */
  async function addressOf(v: ArmVm, deadline: AbortSignal): Promise<string | undefined> {
    const nics = v.properties?.networkProfile?.networkInterfaces ?? [];
    const nic = nics.length === 1 ? nics[0] : nics.find((n) => n.properties?.primary);
    if (!nic?.id) return undefined;
    const r = await call("GET", `${endpoint}${nic.id}?api-version=${NETWORK_API_VERSION}`, deadline);
    if (r.status === 404) return undefined;
    if (r.status !== 200) throw failed(`reading network interface ${nic.id}`, r);
    const configs = json<ArmNic>(r).properties?.ipConfigurations ?? [];
    const c = configs.length === 1 ? configs[0] : configs.find((x) => x.properties?.primary);
    return c?.properties?.privateIPAddress;
  }

  /** DELETE, then ARM's async operation (Azure-AsyncOperation, else Location) until it ends. */
  async function remove(id: string): Promise<void> {
    const limit = s.deleteDeadlineMs ?? DELETE_MS;
    const deadline = AbortSignal.timeout(limit);
    const r = await call("DELETE", `${endpoint}${id}?api-version=${COMPUTE_API_VERSION}`, deadline);
    if (r.status === 200 || r.status === 204 || r.status === 404) return;
    if (r.status !== 202) throw failed(`deleting VM ${id}`, r);
    const operation = r.headers.get("azure-asyncoperation");
    const location = r.headers.get("location");
    if (!operation && !location) throw new Error(`deleting VM ${id}: ARM accepted it but named no operation to follow`);
    let after = r.headers.get("retry-after");
    for (;;) {
      await wait(after, deadline, () => `deleting VM ${id}: not done after ${Math.round(limit / 1000)} s`);
      const p = await call("GET", (operation ?? location)!, deadline);
      after = p.headers.get("retry-after");
      if (operation) {
        if (p.status !== 200) throw failed(`following the deletion of VM ${id}`, p);
        const st = json<{ status?: string }>(p).status ?? "";
        if (st === "Succeeded") return;
        if (st === "Failed" || st === "Canceled") throw new Error(`deleting VM ${id}: ${st} ${detailOf(p.text)}`);
      } else {
        if (p.status === 200 || p.status === 204) return;
        if (p.status !== 202) throw failed(`deleting VM ${id}`, p);
      }
    }
  }

  /** Waits as long as ARM asks (clamped), or fails when the deadline is nearer. */
  async function wait(retryAfter: string | null, deadline: AbortSignal, timeout: () => string): Promise<void> {
    const asked = Number(retryAfter) * 1000;
    const ms = Math.min(poll.max, Math.max(poll.min, Number.isFinite(asked) ? asked : poll.min));
    // lib/poll.ts's pause ends early when the deadline fires; that is then the error.
    await pause(ms, deadline);
    if (deadline.aborted) throw new Error(timeout());
  }
}

function detailOf(text: string): string {
  try {
    const e = (JSON.parse(text) as { error?: { code?: string; message?: string } }).error;
    if (e) return `${e.code ?? ""}: ${e.message ?? ""}`;
  } catch {
    /* not JSON: the text as it came */
  }
  return text.slice(0, 300);
}
