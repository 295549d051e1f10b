// An AWS control-plane node: an EC2 instance from the node's AMI in the subnet of its
// availability zone, IMDSv2 only, its API server registered in the API load balancer (an
// NLB target group on 6443, or a classic ELB), and the shared tail
// (infra/providers/cloud-node.ts). Every resource is named after the node, so a node with a
// new image is a new set of resources, never an in-place update.
import type * as aws from "@pulumi/aws";
import { awsSdk } from "../sdk";
import * as pulumi from "@pulumi/pulumi";
import {
  cloudInitUserData,
  keepFirstBootData,
  nodeTags,
  settingForDomain,
  type CloudControlPlaneNodeArgs,
} from "../cloud-common";
import { CloudControlPlaneNode } from "../cloud-node";
import type { AwsApiLoadBalancer, AwsNodeSettings } from "./config";

export type AwsControlPlaneNodeArgs = CloudControlPlaneNodeArgs<AwsNodeSettings>;

export class AwsControlPlaneNode extends CloudControlPlaneNode {
  readonly instance: aws.ec2.Instance;

  constructor(name: string, args: AwsControlPlaneNodeArgs, opts?: pulumi.ComponentResourceOptions) {
    super("molt:aws:ControlPlaneNode", name, {}, opts);
    const { node, settings: s } = args;
    const zone = node.failureDomain ?? Object.keys(s.subnetIdsByZone)[0];
    const subnetId = settingForDomain(node, s.subnetIdsByZone, "subnet");
    const region = s.region ? { region: s.region } : {};
    const clusterName = args.bootstrap.clusterName ?? "kubernetes";
    const tags = {
      ...s.tags,
      ...nodeTags(node, clusterName),
      // What the AWS cloud controller manager reads to tell this cluster's machines.
      [`kubernetes.io/cluster/${clusterName}`]: s.clusterTag ?? "owned",
      Name: node.name,
    };
    const vol = s.rootVolume;
    if (s.sshAddress === "public" && !s.associatePublicIpAddress) {
      throw new Error(`node ${node.name}: sshAddress "public" needs associatePublicIpAddress: true`);
    }

    const sdk = awsSdk();
    this.instance = new sdk.ec2.Instance(
      node.name,
      {
        ...region,
        ami: node.image,
        instanceType: s.instanceType,
        subnetId,
        availabilityZone: zone,
        vpcSecurityGroupIds: s.securityGroupIds,
        associatePublicIpAddress: s.associatePublicIpAddress ?? false,
        iamInstanceProfile: s.iamInstanceProfile,
        userData: cloudInitUserData(node, args.ssh, args.hostKey),
        metadataOptions: {
          httpEndpoint: "enabled",
          httpTokens: "required",
          httpPutResponseHopLimit: s.metadataHopLimit ?? 1,
        },
        rootBlockDevice: {
          volumeSize: vol.sizeGiB,
          volumeType: vol.type ?? "gp3",
          iops: vol.iops,
          throughput: vol.throughput,
          encrypted: vol.encrypted ?? true,
          kmsKeyId: vol.kmsKeyId,
          deleteOnTermination: true,
          tags,
        },
        tags,
      },
      // The AMI makes the machine: a change means a new machine. Its user data (host key,
      // login) stays as it was at creation.
      { parent: this, replaceOnChanges: ["ami"], deleteBeforeReplace: false, ...keepFirstBootData(["userData"]) },
    );

    const attachment = apiAttachment(`${node.name}-api`, s.loadBalancer, this.instance.id, s.region, { parent: this });

    // After the LB attachment: kubeadm reaches the API through controlPlaneEndpoint.
    this.completeNode(args, {
      privateAddress: this.instance.privateIp,
      ...(s.associatePublicIpAddress ? { publicAddress: this.instance.publicIp } : {}),
      sshHost: s.sshAddress === "public" ? this.instance.publicIp : this.instance.privateIp,
      providerId: pulumi.interpolate`aws:///${this.instance.availabilityZone}/${this.instance.id}`,
      machineId: this.instance.id,
      dependsOn: [this.instance, attachment],
    });
  }
}

/**
 * The registration of an instance's API server (6443) in the API load balancer: a target
 * group attachment, or a classic ELB attachment (the ELB's listener names the instance port).
 * Created with the node, deleted with it: the delete deregisters the instance.
 */
export function apiAttachment(
  name: string,
  lb: AwsApiLoadBalancer,
  instanceId: pulumi.Input<string>,
  region: string | undefined,
  opts: pulumi.CustomResourceOptions,
): pulumi.CustomResource {
  const sdk = awsSdk();
  const r = region ? { region } : {};
  return "classicElb" in lb
    ? new sdk.elb.Attachment(name, { ...r, elb: lb.classicElb, instance: instanceId }, opts)
    : new sdk.lb.TargetGroupAttachment(
        name,
        { ...r, targetGroupArn: lb.targetGroupArn, targetId: instanceId, port: 6443 },
        opts,
      );
}
