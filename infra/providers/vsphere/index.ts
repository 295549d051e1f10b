// Provider "vsphere": VMs cloned from a template, placed per failure domain (compute
// cluster, datastore, host), kept apart by a DRS anti-affinity rule.
import { cloudProvider } from "../cloud-program";
import { vsphereImport } from "../imported";
import type { CloudCommonSections } from "../cloud-config";
import type { CloudConfigBase } from "../provider";
import { VsphereControlPlaneAntiAffinity } from "./anti-affinity";
import { VSPHERE_PROVIDER_VERSION } from "./bindings";
import {
  vsphereSections,
  type VsphereAntiAffinitySettings,
  type VsphereNodeSettings,
  type VsphereSections,
} from "./config";
import { VsphereControlPlaneNode } from "./node";

export * from "./anti-affinity";
export * from "./bindings";
export * from "./config";
export * from "./node";

export interface VsphereCloudConfig extends CloudConfigBase {
  provider: "vsphere";
  vsphere: VsphereNodeSettings;
  antiAffinity: VsphereAntiAffinitySettings;
}

type Parsed = CloudCommonSections & VsphereSections;

export const vsphereProvider = cloudProvider<VsphereCloudConfig>({
  family: "cloud",
  kind: "vsphere",
  sections: vsphereSections,
  plugins: [{ kind: "resource", name: "vsphere", version: VSPHERE_PROVIDER_VERSION }],
  clusterWideTypes: ["molt:vsphere:ControlPlaneAntiAffinity"],
  // A template name or inventory path: vCenter answers whether it exists (at the first up).
  imageProblem: () => undefined,
  domains(sections) {
    const known = Object.keys((sections as Parsed)["molt:vsphere"].failureDomains);
    return { known, where: "molt:vsphere.failureDomains", unplacedAllowed: known.length <= 1 };
  },
  config(sections, common) {
    const s = sections as Parsed;
    const aa = s["molt:vsphereAntiAffinity"];
    return {
      provider: "vsphere",
      ...common,
      vsphere: s["molt:vsphere"],
      antiAffinity: {
        mandatory: aa?.mandatory ?? false,
        ...(aa?.enabled !== undefined ? { enabled: aa.enabled } : {}),
      },
    };
  },
  node: (entry, args, cloud) => new VsphereControlPlaneNode(entry.name, { ...args, settings: cloud.vsphere }),
  cluster(cloud, nodes) {
    if (cloud.antiAffinity.enabled === false) return;
    new VsphereControlPlaneAntiAffinity("control-plane-anti-affinity", {
      clusterName: cloud.bootstrap.clusterName ?? "kubernetes",
      nodes: nodes as VsphereControlPlaneNode[],
      mandatory: cloud.antiAffinity.mandatory,
    });
  },
  importIdProblem: vsphereImport.problem,
  importMachine: vsphereImport.machine,
});
