// An AWS control-plane node: an EC2 instance from the node's AMI in the subnet of its
// availability zone, IMDSv2 only, its API server registered in the API load balancer's
// target group on 6443, and the shared tail (infra/providers/cloud-node.ts). Every
// resource is named after the node, so a node with a new image is a new set of
// resources, never an in-place update.
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
import type { AwsNodeSettings } from "./config";

export type AwsControlPlaneNodeArgs = CloudControlPlaneNodeArgs<AwsNodeSettings>;

export class AwsControlPlaneNode extends CloudControlPlaneNode {
  readonly instance: aws.ec2.Instance;

  constructor(name: string, args: AwsControlPlaneNodeArgs, opts?: pulumi.ComponentResourceOptions) {
    super("molt:aws:ControlPlaneNode", name, {}, opts);
    const { node, settings: s } = args;
    const zone = node.failureDomain ?? Object.keys(s.subnetIdsByZone)[0];
    const subnetId = settingForDomain(node, s.subnetIdsByZone, "subnet");
    const region = s.region ? { region: s.region } : {};
    const tags = { ...s.tags, ...nodeTags(node, args.bootstrap.clusterName ?? "kubernetes"), Name: node.name };
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

    const attachment = new sdk.lb.TargetGroupAttachment(
      `${node.name}-api`,
      { ...region, targetGroupArn: s.apiTargetGroupArn, targetId: this.instance.id, port: 6443 },
      { parent: this },
    );

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
