// molt:azure: the settings of Azure control-plane nodes, as typed settings
// (AzureNodeSettings) and as the schema that checks them in stacks/Pulumi.<stack>.yaml.
import type * as azure from "@pulumi/azure-native";
import type * as pulumi from "@pulumi/pulumi";
import { z } from "zod";
import { count, required, stringMap, text } from "../cloud-config";

export interface AzureNodeSettings {
  resourceGroupName: pulumi.Input<string>;
  location: string;
  vmSize: string;
  /** Subnet of the control-plane NICs (one VNet subnet spans the zones of a region). */
  subnetId: pulumi.Input<string>;
  /** Backend address pool of the API load balancer (its rule forwards 6443). */
  apiBackendPoolId: pulumi.Input<string>;
  /** Network security group on the NICs, if not on the subnet. */
  networkSecurityGroupId?: pulumi.Input<string>;
  /** Availability zones a failureDomain may name ("1", "2", "3"); empty for regions without zones. */
  zones: string[];
  /**
   * Without zones: the fault domains of the availability set molt makes for the control
   * plane (default 2; 3 where the region has them). Ignored with zones.
   */
  faultDomainCount?: number;
  osDisk: {
    sizeGiB: number;
    /** Premium_LRS (default), PremiumV2_LRS, StandardSSD_LRS, ... */
    storageAccountType?: string;
  };
  /** Accelerated networking on the NIC (default true; needs a VM size that supports it). */
  acceleratedNetworking?: boolean;
  tags?: Record<string, string>;
}

const BACKEND_POOL =
  /^\/subscriptions\/([^/]+)\/resourceGroups\/([^/]+)\/providers\/Microsoft\.Network\/loadBalancers\/([^/]+)\/backendAddressPools\/([^/]+)$/i;

export interface BackendPoolRef {
  subscription: string;
  resourceGroupName: string;
  loadBalancerName: string;
  poolName: string;
}

/** The parts of a backend pool's resource id, or undefined when it is not one. */
export function parseBackendPoolId(id: string): BackendPoolRef | undefined {
  const m = BACKEND_POOL.exec(id);
  return m ? { subscription: m[1], resourceGroupName: m[2], loadBalancerName: m[3], poolName: m[4] } : undefined;
}

/** What is wrong with a backend pool id, or undefined. */
export function backendPoolProblem(id: string): string | undefined {
  return parseBackendPoolId(id)
    ? undefined
    : "a backend pool's resource id (/subscriptions/SUB/resourceGroups/RG/providers/Microsoft.Network/" +
        "loadBalancers/LB/backendAddressPools/POOL; KubeOne's: " +
        "loadBalancers/kubernetes/backendAddressPools/ApiServers)";
}

const azureId = (what: string) =>
  z.string({ message: what }).startsWith("/subscriptions/", `${what}: an Azure resource id (/subscriptions/...)`);

export const azureSection = z
  .object(
    {
      resourceGroupName: text("the resource group of the nodes"),
      location: text("an Azure region such as westeurope"),
      vmSize: text("a VM size such as Standard_D4s_v5"),
      subnetId: azureId("the control-plane subnet"),
      apiBackendPoolId: azureId("the API load balancer's backend pool").superRefine((v, c) => {
        const p = v.startsWith("/subscriptions/") ? backendPoolProblem(v) : undefined;
        if (p) c.addIssue({ code: "custom", message: p });
      }),
      networkSecurityGroupId: azureId("a network security group").optional(),
      zones: z.array(z.string().min(1)).optional(),
      faultDomainCount: z.number().int().min(1, "1 to 3").max(3, "1 to 3 (regions offer 2 or 3)").optional(),
      osDisk: z
        .object(
          { sizeGiB: count(30, "GiB of the OS disk"), storageAccountType: z.string().min(1).optional() },
          required("the OS disk: { sizeGiB, storageAccountType }"),
        )
        .strict(),
      acceleratedNetworking: z.boolean().optional(),
      tags: stringMap.optional(),
    },
    required("required for provider azure: the node settings (see stacks/Pulumi.azure.yaml)"),
  )
  .strict();

// The schema's output, with zones defaulted, is the settings type.
export const _azureSectionFits: (s: z.infer<typeof azureSection>) => AzureNodeSettings = (s) => ({
  ...s,
  zones: s.zones ?? [],
});

/**
 * The node's image as an Azure image reference: a marketplace URN
 * "Publisher:Offer:Sku:Version" or the resource id of a (gallery) image version.
 */
export function imageReference(image: string): azure.types.input.compute.ImageReferenceArgs {
  if (image.startsWith("/")) return { id: image };
  const parts = image.split(":");
  if (parts.length !== 4 || parts.some((p) => p.length === 0)) {
    throw new Error(`image ${JSON.stringify(image)} is neither Publisher:Offer:Sku:Version nor an image resource id`);
  }
  if (parts[3] === "latest") {
    throw new Error(
      `image ${JSON.stringify(image)}: pin an exact version; "latest" would change the node's image behind molt's back`,
    );
  }
  const [publisher, offer, sku, version] = parts;
  return { publisher, offer, sku, version };
}
