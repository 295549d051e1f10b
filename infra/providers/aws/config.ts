// molt:aws: the settings of AWS control-plane nodes, as typed settings (AwsNodeSettings)
// and as the schema that checks them in stacks/Pulumi.<stack>.yaml.
import type * as pulumi from "@pulumi/pulumi";
import { z } from "zod";
import { count, required, stringMap, text } from "../cloud-config";

/**
 * The API load balancer new nodes are registered in (molt:aws.loadBalancer): an NLB's TCP
 * 6443 target group (instance targets), or a classic ELB by name (KubeOne's AWS example makes
 * `aws_elb.control_plane`, which has no target group).
 */
export type AwsApiLoadBalancer = { targetGroupArn: pulumi.Input<string> } | { classicElb: pulumi.Input<string> };

/** The value of the `kubernetes.io/cluster/<clusterName>` tag (what the AWS cloud controller reads). */
export type AwsClusterTag = "owned" | "shared";

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
  /** Where the API server of every node (molt's and, when they retire, adopted ones) is registered. */
  loadBalancer: AwsApiLoadBalancer;
  rootVolume: AwsRootVolume;
  /** Instance profile (e.g. for the AWS cloud controller manager). */
  iamInstanceProfile?: pulumi.Input<string>;
  /** Give the instance a public address (default false). */
  associatePublicIpAddress?: boolean;
  /** Which address molt's SSH uses: "private" (default, from inside the VPC or a VPN) or "public". */
  sshAddress?: "private" | "public";
  /** IMDSv2 hop limit (default 1: only the host, not containers, reaches instance metadata). */
  metadataHopLimit?: number;
  /**
   * `kubernetes.io/cluster/<clusterName>` on instances and volumes (default "owned": the
   * machine belongs to this cluster alone); "shared" as KubeOne tags its machines.
   */
  clusterTag?: AwsClusterTag;
  tags?: Record<string, string>;
}

// ELB names: 1-32 letters, digits and hyphens, not starting or ending with a hyphen, and
// not starting with "internal-" (AWS's prefix for internal load balancers' DNS names).
const CLASSIC_ELB_NAME = /^(?!internal-)[A-Za-z0-9](?:[A-Za-z0-9-]{0,30}[A-Za-z0-9])?$/;
const TARGET_GROUP_ARN =
  /^arn:aws[a-z-]*:elasticloadbalancing:[a-z0-9-]+:[0-9]{12}:targetgroup\/[A-Za-z0-9-]{1,32}\/[0-9a-f]{16}$/;

/** What is wrong with a classic ELB's name, or undefined. */
export function classicElbProblem(name: string): string | undefined {
  if (name.startsWith("arn:"))
    return (
      "a classic ELB is named, not given by ARN (an ARN names an ALB or NLB: give its TCP 6443 target group as " +
      "targetGroupArn instead)"
    );
  if (/\.elb\.amazonaws\.com\.?$/i.test(name) || name.includes("."))
    return (
      `${JSON.stringify(name)} is a DNS name; give the load balancer's name (LoadBalancerName in \`aws elb ` +
      "describe-load-balancers`; KubeOne's is <cluster>-api-lb)"
    );
  return CLASSIC_ELB_NAME.test(name)
    ? undefined
    : `${JSON.stringify(name)} is not a classic ELB name (1-32 letters, digits and hyphens, no hyphen at either end)`;
}

/** What is wrong with a target group ARN, or undefined. */
export function targetGroupArnProblem(arn: string): string | undefined {
  if (/:loadbalancer\//.test(arn))
    return (
      "that is the load balancer's ARN; molt registers nodes in its TCP 6443 target group: give the " +
      "targetgroup/... ARN"
    );
  return TARGET_GROUP_ARN.test(arn)
    ? undefined
    : `${JSON.stringify(arn)} is not a target group ARN ` +
        "(arn:aws:elasticloadbalancing:REGION:ACCOUNT:targetgroup/NAME/ID)";
}

const LOAD_BALANCER_REQUIRED =
  "the API load balancer new nodes are registered in: { classicElb: NAME } (a classic ELB, as KubeOne's " +
  "aws_elb.control_plane) or { targetGroupArn: ARN } (an NLB's TCP 6443 target group, instance targets)";

const loadBalancerSchema = z
  .object(
    {
      classicElb: z.string().superRefine((v, c) => {
        const p = classicElbProblem(v);
        if (p) c.addIssue({ code: "custom", message: p });
      }),
      targetGroupArn: z.string().superRefine((v, c) => {
        const p = targetGroupArnProblem(v);
        if (p) c.addIssue({ code: "custom", message: p });
      }),
    },
    required(LOAD_BALANCER_REQUIRED),
  )
  .partial()
  .strict()
  .superRefine((lb, c) => {
    const given = Object.keys(lb).filter((k) => lb[k as keyof typeof lb] !== undefined);
    if (given.length === 0) c.addIssue({ code: "custom", message: LOAD_BALANCER_REQUIRED });
    if (given.length > 1)
      c.addIssue({
        code: "custom",
        message: "one of classicElb or targetGroupArn, not both: a node is registered in one load balancer",
      });
  })
  .transform((lb): AwsApiLoadBalancer =>
    lb.classicElb !== undefined ? { classicElb: lb.classicElb } : { targetGroupArn: lb.targetGroupArn ?? "" },
  );

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
      loadBalancer: loadBalancerSchema,
      // The spelling before classic ELBs: refused with the new one, so a stack file never means two things.
      apiTargetGroupArn: z
        .unknown()
        .refine(
          (v) => v === undefined,
          "now written loadBalancer: { targetGroupArn: ARN } (or { classicElb: NAME } for a classic ELB)",
        )
        .optional(),
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
      clusterTag: z
        .enum(["owned", "shared"], { message: "owned (the machine is this cluster's alone, the default) or shared" })
        .optional(),
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
export const _awsSectionFits: (s: z.infer<typeof awsSection>) => AwsNodeSettings = ({ apiTargetGroupArn: _, ...s }) =>
  s;

/** An AMI id, or what is wrong with it. */
export function amiProblem(image: string): string | undefined {
  return /^ami-[0-9a-f]{8,17}$/.test(image)
    ? undefined
    : `an AMI id such as ami-0123456789abcdef0 (got ${JSON.stringify(image)})`;
}
