// Provider "azure": VMs whose NICs sit in the API load balancer's backend pool; zones as
// failure domains, or one availability set where the region has no zones.
import { cloudProvider } from "../cloud-program";
import { azureImport } from "../imported";
import type { CloudCommonSections } from "../cloud-config";
import { sdkPlugin, type CloudConfigBase } from "../provider";
import { azureSection, imageReference, type AzureNodeSettings } from "./config";
import { AzureControlPlaneAvailabilitySet, AzureControlPlaneNode, endpointAddressKind } from "./node";
import { adoptedAttachment, adoptedRelease, apiLoadBalancer } from "./load-balancer";

export * from "./config";
export * from "./node";
export * from "./load-balancer";
export * from "./pool-membership";
export * from "./network";

export interface AzureCloudConfig extends CloudConfigBase {
  provider: "azure";
  azure: AzureNodeSettings;
}

type Parsed = CloudCommonSections & { "molt:azure": Omit<AzureNodeSettings, "zones"> & { zones?: string[] } };

export const azureProvider = cloudProvider<AzureCloudConfig, AzureControlPlaneAvailabilitySet | undefined>({
  family: "cloud",
  kind: "azure",
  sections: { "molt:azure": azureSection },
  plugins: [sdkPlugin("azure-native", "@pulumi/azure-native")],
  clusterWideTypes: ["molt:azure:ControlPlaneAvailabilitySet"],
  imageProblem(image) {
    try {
      imageReference(image);
      return undefined;
    } catch (e) {
      return (e as Error).message;
    }
  },
  domains(sections) {
    const known = (sections as Parsed)["molt:azure"].zones ?? [];
    return { known, where: "molt:azure.zones", unplacedAllowed: known.length === 0 };
  },
  config(sections, common) {
    const azure = (sections as Parsed)["molt:azure"];
    return { provider: "azure", ...common, azure: { ...azure, zones: azure.zones ?? [] } };
  },
  problems(cloud) {
    // A name is mapped to the local API server on every control-plane node (an internal
    // frontend does not hairpin); a public frontend address, as KubeOne's azurerm_lb has,
    // needs no mapping (endpointRoutingFor). A private address can be neither.
    const endpoint = cloud.bootstrap.controlPlaneEndpoint;
    return endpointAddressKind(endpoint) === "private"
      ? [
          `molt:bootstrap.controlPlaneEndpoint: ${endpoint} is a private address: on Azure an internal load ` +
            "balancer's frontend does not hairpin (a node whose connection it sends to itself fails), and an " +
            "address cannot be mapped to the local API server. Use a DNS name (a private DNS zone record pointing " +
            "at the load balancer serves everything else), or the public frontend address of a public load balancer",
        ]
      : [];
  },
  shared: (cloud) =>
    cloud.azure.zones.length === 0
      ? new AzureControlPlaneAvailabilitySet("control-plane-availability-set", {
          clusterName: cloud.bootstrap.clusterName ?? "kubernetes",
          settings: cloud.azure,
        })
      : undefined,
  node: (entry, args, cloud, set) =>
    new AzureControlPlaneNode(entry.name, {
      ...args,
      settings: cloud.azure,
      ...(set ? { availabilitySetId: set.id } : {}),
    }),
  importIdProblem: azureImport.problem,
  importMachine: azureImport.machine,
  adoptedAttachment: (entry, cloud, machine) => adoptedAttachment(entry, cloud.azure, machine),
  adoptedRelease: (entry) => adoptedRelease(entry),
  apiLoadBalancer: (cloud, adopted) => apiLoadBalancer(cloud.azure, adopted),
});
