// molt:aws: the settings of AWS control-plane nodes, as typed settings (AwsNodeSettings)
// and as the schema that checks them in stacks/Pulumi.<stack>.yaml.
import type * as pulumi from "@pulumi/pulumi";
import { z } from "zod";
import { count, required, stringMap, text } from "../cloud-config";

export interface AwsRootVolume {
  /** GiB (etcd wants fast, not big: 50-100 is typical). */
  sizeGiB: number;
  /** gp3 (default), gp2, io1, io2. */
  type?: string;
  iops?: number;
  /** MiB/s, gp3 only. */
  throughput?: number;
  /** Default true. */
  encrypted?: boolean;
  kmsKeyId?: string;
}

export interface AwsNodeSettings {
  /** Region for the node's resources (default: the provider's). */
  region?: string;
  instanceType: string;
  /** Subnet per availability zone; a node's failureDomain is its zone. */
  subnetIdsByZone: Record<string, string>;
  /** Security groups of control-plane instances (see AwsControlPlaneSecurityGroup). */
  securityGroupIds: pulumi.Input<string>[];
  /** ARN of the API network load balancer's TCP 6443 target group (instance targets). */
  apiTargetGroupArn: pulumi.Input<string>;
  rootVolume: AwsRootVolume;
  /** Instance profile (e.g. for the AWS cloud controller manager). */
  iamInstanceProfile?: pulumi.Input<string>;
  /** Give the instance a public address (default false). */
  associatePublicIpAddress?: boolean;
  /** Which address molt's SSH uses: "private" (default, from inside the VPC or a VPN) or "public". */
  sshAddress?: "private" | "public";
  /** IMDSv2 hop limit (default 1: only the host, not containers, reaches instance metadata). */
  metadataHopLimit?: number;
  tags?: Record<string, string>;
}

export const awsSection = z
  .object(
    {
      region: z.string().min(1).optional(),
      instanceType: text("an EC2 instance type such as m6i.large"),
      subnetIdsByZone: z
        .record(
          z.string(),
          z.string().startsWith("subnet-", "a subnet id (subnet-...)"),
          required("the subnet of each availability zone: { eu-central-1a: subnet-... }"),
        )
        .refine((m) => Object.keys(m).length > 0, "at least one zone: subnet id"),
      securityGroupIds: z
        .array(
          z.string().startsWith("sg-", "a security group id (sg-...)"),
          required("the control-plane security group ids: [sg-...]"),
        )
        .min(1, "at least one security group id"),
      apiTargetGroupArn: text("the ARN of the API load balancer's TCP 6443 target group").startsWith(
        "arn:",
        "the ARN of the API load balancer's TCP 6443 target group",
      ),
      rootVolume: z
        .object(
          {
            sizeGiB: count(8, "GiB of the root volume"),
            type: z.enum(["gp3", "gp2", "io1", "io2"]).optional(),
            iops: z.number().int().min(100).optional(),
            throughput: z.number().int().min(125).optional(),
            encrypted: z.boolean().optional(),
            kmsKeyId: z.string().min(1).optional(),
          },
          required("the root volume: { sizeGiB, type, iops, throughput }"),
        )
        .strict(),
      iamInstanceProfile: z.string().min(1).optional(),
      associatePublicIpAddress: z.boolean().optional(),
      sshAddress: z.enum(["private", "public"]).optional(),
      metadataHopLimit: z.number().int().min(1).max(64).optional(),
      tags: stringMap.optional(),
    },
    required("required for provider aws: the node settings (see stacks/Pulumi.aws.yaml)"),
  )
  .strict()
  .refine((a) => a.sshAddress !== "public" || a.associatePublicIpAddress === true, {
    message: 'sshAddress "public" needs associatePublicIpAddress: true',
    path: ["sshAddress"],
  });

// The schema's output is the settings type (a change to either must keep them together).
export const _awsSectionFits: (s: z.infer<typeof awsSection>) => AwsNodeSettings = (s) => s;

/** An AMI id, or what is wrong with it. */
export function amiProblem(image: string): string | undefined {
  return /^ami-[0-9a-f]{8,17}$/.test(image)
    ? undefined
    : `an AMI id such as ami-0123456789abcdef0 (got ${JSON.stringify(image)})`;
}
