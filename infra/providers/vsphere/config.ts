// molt:vsphere and molt:vsphereAntiAffinity: the settings of vSphere control-plane nodes,
// as typed settings and as the schema that checks them in stacks/Pulumi.<stack>.yaml.
import { z } from "zod";
import { count, required, text } from "../cloud-config";
import { staticAddressesSchema } from "./static-addresses";
import type { VipSettings } from "../../vip/keepalived";
import type { VsphereStaticAddresses } from "./network";

export interface VsphereFailureDomain {
  /** Compute cluster (DRS) the VMs run in; the anti-affinity rule lives there. */
  computeCluster: string;
  /** Resource pool path (default "<computeCluster>/Resources"). */
  resourcePool?: string;
  datastore: string;
  /**
   * Place the VM on this ESXi host (a host-level failure domain). On its own this is the
   * initial placement only: DRS may migrate the VM later. See keepOnHost.
   */
  host?: string;
  /**
   * With `host`: keep the VM there (a DRS override disables DRS for the VM, so DRS never
   * moves it). vSphere HA may still restart it on another host after a host failure, and
   * it then stays there until it is rolled.
   */
  keepOnHost?: boolean;
  /** Port group for this domain (default: settings.network). */
  network?: string;
}

export interface VsphereNodeSettings {
  datacenter: string;
  /** VM folder path, relative to the datacenter's vm folder. */
  folder?: string;
  /** Port group of the control-plane network (DHCP, or addresses reserved by MAC outside molt). */
  network: string;
  numCpus: number;
  memoryMiB: number;
  /** OS disk size (GiB); never smaller than the template's disk. */
  diskGiB: number;
  /** Failure domains by name (a node's failureDomain); one entry for a single domain. */
  failureDomains: Record<string, VsphereFailureDomain>;
  /** Minutes to wait for the guest's routable address (default 10). */
  guestNetTimeoutMinutes?: number;
  /** Fixed node addresses (guestinfo network metadata) instead of DHCP: see network.ts. */
  staticAddresses?: VsphereStaticAddresses;
  /** molt:apiEndpoint mode vip: keepalived on every node moves the API endpoint's VIP. */
  vip?: VipSettings;
}

/** The DRS anti-affinity rule over the control-plane VMs (molt:vsphereAntiAffinity). */
export interface VsphereAntiAffinitySettings {
  /** A must-rule: DRS refuses to power on VMs it cannot separate (default false: a should-rule). */
  mandatory: boolean;
  /** false: no rule at all (clusters without DRS, where vCenter refuses rules). Default true. */
  enabled?: boolean;
}

const domainSchema = z
  .object({
    computeCluster: text("the DRS compute cluster of this domain"),
    resourcePool: z.string().min(1).optional(),
    datastore: text("the datastore of this domain"),
    host: z.string().min(1).optional(),
    keepOnHost: z.boolean().optional(),
    network: z.string().min(1).optional(),
  })
  .strict()
  .refine((d) => !d.keepOnHost || d.host !== undefined, {
    message: "keepOnHost needs host: the ESXi host to keep the VM on",
    path: ["keepOnHost"],
  });

export const vsphereSections = {
  "molt:vsphere": z
    .object(
      {
        datacenter: text("the datacenter name"),
        folder: z.string().min(1).optional(),
        network: text("the port group of the control-plane network"),
        numCpus: count(2, "vCPUs per node"),
        memoryMiB: count(2048, "MiB of memory per node"),
        diskGiB: count(10, "GiB of the OS disk"),
        guestNetTimeoutMinutes: z.number().int().min(1).optional(),
        staticAddresses: staticAddressesSchema.optional(),
        failureDomains: z
          .record(
            z.string(),
            domainSchema,
            required("where VMs go, by domain name: { rack-a: { computeCluster, datastore } }"),
          )
          .refine((m) => Object.keys(m).length > 0, "at least one domain (name: { computeCluster, datastore })"),
      },
      required("required for provider vsphere: the node settings (see stacks/Pulumi.vsphere.yaml)"),
    )
    .strict(),
  "molt:vsphereAntiAffinity": z
    .object({ mandatory: z.boolean().optional(), enabled: z.boolean().optional() })
    .strict()
    .optional(),
} as const;

export type VsphereSections = z.infer<z.ZodObject<typeof vsphereSections>>;

// The schema's output is the settings type.
export const _vsphereSectionFits: (s: VsphereSections["molt:vsphere"]) => VsphereNodeSettings = (s) => s;
