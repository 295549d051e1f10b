// Provider "aws": EC2 instances behind an NLB target group or a classic ELB, zones as failure
// domains.
import { cloudProvider } from "../cloud-program";
import type { CloudCommonSections } from "../cloud-config";
import type { CloudConfigBase } from "../provider";
import { sdkPlugin } from "../provider";
import { amiProblem, awsSection, type AwsNodeSettings } from "./config";
import { AwsControlPlaneNode } from "./node";
import { awsImport } from "../imported";
import { adoptedAttachment, adoptedRelease, apiLoadBalancer } from "./load-balancer";

export * from "./config";
export * from "./node";
export * from "./load-balancer";
export * from "./security-group";
export * from "./network";

export interface AwsCloudConfig extends CloudConfigBase {
  provider: "aws";
  aws: AwsNodeSettings;
}

type Parsed = CloudCommonSections & { "molt:aws": AwsNodeSettings };

export const awsProvider = cloudProvider<AwsCloudConfig>({
  family: "cloud",
  kind: "aws",
  sections: { "molt:aws": awsSection },
  plugins: [sdkPlugin("aws", "@pulumi/aws")],
  clusterWideTypes: [],
  imageProblem: amiProblem,
  domains(sections) {
    const known = Object.keys((sections as Parsed)["molt:aws"].subnetIdsByZone);
    return { known, where: "molt:aws.subnetIdsByZone", unplacedAllowed: known.length <= 1 };
  },
  config: (sections, common) => ({ provider: "aws", ...common, aws: (sections as Parsed)["molt:aws"] }),
  node: (entry, args, cloud) => new AwsControlPlaneNode(entry.name, { ...args, settings: cloud.aws }),
  importIdProblem: awsImport.problem,
  importMachine: awsImport.machine,
  adoptedAttachment: (entry, cloud, machine) => adoptedAttachment(entry, cloud.aws, machine),
  adoptedRelease: (entry, cloud) => adoptedRelease(entry, cloud.aws),
  apiLoadBalancer: (cloud, adopted) => apiLoadBalancer(cloud.aws, adopted),
});
