// Provider "azure": VMs whose NICs sit in the API load balancer's backend pool; zones as
// failure domains, or one availability set where the region has no zones.
import { cloudProvider } from "../cloud-program";
import { azureImport } from "../imported";
import type { CloudCommonSections } from "../cloud-config";
import { sdkPlugin, type CloudConfigBase } from "../provider";
import { azureSection, imageReference, type AzureNodeSettings } from "./config";
import { AzureControlPlaneAvailabilitySet, AzureControlPlaneNode } from "./node";
import { adoptedAttachment, adoptedRelease, apiLoadBalancer } from "./load-balancer";

export * from "./config";
export * from "./node";
export * from "./load-balancer";
export * from "./pool-membership";

export interface AzureCloudConfig extends CloudConfigBase {
  provider: "azure";
  azure: AzureNodeSettings;
}

type Parsed = CloudCommonSections & { "molt:azure": Omit<AzureNodeSettings, "zones"> & { zones?: string[] } };

const IP_HOST = /^(\d{1,3}(\.\d{1,3}){3}|\[[0-9a-fA-F:.]+\]):\d+$/;

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
    // The endpoint's name is mapped to the local API server on every control-plane node:
    // an address cannot be.
    return IP_HOST.test(cloud.bootstrap.controlPlaneEndpoint)
      ? [
          "molt:bootstrap.controlPlaneEndpoint: a DNS name on Azure, not an address: Azure load balancers do not " +
            "hairpin, so molt maps the name to the local API server on control-plane nodes (a private DNS zone " +
            "record pointing at the load balancer serves everything else)",
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
