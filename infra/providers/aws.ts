// An AWS control-plane node: an EC2 instance from the node's AMI in the subnet of its
// availability zone, IMDSv2 only, its API server registered in the API load balancer's
// target group on 6443, and the kubeadm bootstrap/teardown command. Every resource is
// named after the node, so a node with a new image is a new set of resources, never an
// in-place update.
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import type { ControlPlaneNodeOutputs } from "../node";
import { kubeadmBootstrapCommand } from "../kubeadm/bootstrap";
import type { ConnectionArgs, RemoteCommand } from "../remote/command";
import {
  cloudInitUserData,
  connectionOf,
  keepFirstBootData,
  nodeTags,
  settingForDomain,
  type CloudControlPlaneNodeArgs,
} from "./cloud-common";

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

export type AwsControlPlaneNodeArgs = CloudControlPlaneNodeArgs<AwsNodeSettings>;

export class AwsControlPlaneNode extends pulumi.ComponentResource implements ControlPlaneNodeOutputs {
  readonly privateAddress: pulumi.Output<string>;
  readonly publicAddress?: pulumi.Output<string>;
  readonly sshHost: pulumi.Output<string>;
  readonly sshPort: pulumi.Output<number>;
  readonly hostPublicKey: pulumi.Output<string>;
  readonly providerId: pulumi.Output<string>;
  readonly instance: aws.ec2.Instance;
  /** kubeadm init/join on create, reset on delete. */
  readonly bootstrap: RemoteCommand;
  /** How molt (and a joining node's join material) reaches this node. */
  readonly connection: pulumi.Output<ConnectionArgs>;

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

    this.instance = new aws.ec2.Instance(
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

    const attachment = new aws.lb.TargetGroupAttachment(
      `${node.name}-api`,
      { ...region, targetGroupArn: s.apiTargetGroupArn, targetId: this.instance.id, port: 6443 },
      { parent: this },
    );

    this.privateAddress = this.instance.privateIp;
    if (s.associatePublicIpAddress) this.publicAddress = this.instance.publicIp;
    this.sshHost = s.sshAddress === "public" ? this.instance.publicIp : this.instance.privateIp;
    this.sshPort = pulumi.output(args.ssh.port ?? 22);
    this.hostPublicKey = pulumi.output(args.hostKey.publicKey);
    // The form the AWS cloud provider gives Node.spec.providerID.
    this.providerId = pulumi.interpolate`aws:///${this.instance.availabilityZone}/${this.instance.id}`;

    this.connection = connectionOf(this, args);

    // After the LB attachment: kubeadm reaches the API through controlPlaneEndpoint.
    this.bootstrap = kubeadmBootstrapCommand(
      `${node.name}-kubeadm`,
      {
        node,
        ssh: args.ssh,
        hostKey: args.hostKey,
        settings: args.bootstrap,
        sshHost: this.sshHost,
        advertiseAddress: this.privateAddress,
        machineId: this.instance.id,
        joinMaterial: args.joinMaterial,
        seed: args.seed,
        joinedAlready: args.joinedAlready,
      },
      { parent: this, dependsOn: [this.instance, attachment, ...(args.after ? [args.after] : [])] },
    );

    this.registerOutputs({
      privateAddress: this.privateAddress,
      sshHost: this.sshHost,
      sshPort: this.sshPort,
      hostPublicKey: this.hostPublicKey,
      providerId: this.providerId,
    });
  }
}

export interface AwsControlPlaneSecurityGroupArgs {
  region?: string;
  vpcId: pulumi.Input<string>;
  /** Who may reach the API servers on 6443 (the NLB preserves client addresses). */
  apiSourceCidrs: string[];
  /** Where molt (and operators) connect from over SSH. */
  sshSourceCidrs: string[];
  tags?: Record<string, string>;
}

/**
 * The security group of a cluster's control-plane instances: API from the given
 * sources, etcd peer/client, kubelet and controller ports only between control-plane
 * nodes, SSH from molt's networks. Create it once per cluster, not per node.
 */
export class AwsControlPlaneSecurityGroup extends pulumi.ComponentResource {
  readonly id: pulumi.Output<string>;

  constructor(name: string, args: AwsControlPlaneSecurityGroupArgs, opts?: pulumi.ComponentResourceOptions) {
    super("molt:aws:ControlPlaneSecurityGroup", name, {}, opts);
    const between = (fromPort: number, toPort: number, description: string) => ({
      protocol: "tcp",
      fromPort,
      toPort,
      self: true,
      description,
    });
    const sg = new aws.ec2.SecurityGroup(
      name,
      {
        ...(args.region ? { region: args.region } : {}),
        vpcId: args.vpcId,
        description: "molt: Kubernetes control-plane nodes",
        ingress: [
          {
            protocol: "tcp",
            fromPort: 6443,
            toPort: 6443,
            cidrBlocks: args.apiSourceCidrs,
            description: "Kubernetes API",
          },
          { protocol: "tcp", fromPort: 22, toPort: 22, cidrBlocks: args.sshSourceCidrs, description: "SSH (molt)" },
          between(6443, 6443, "Kubernetes API between control-plane nodes"),
          between(2379, 2380, "etcd client and peer"),
          between(10250, 10250, "kubelet"),
          between(10257, 10257, "kube-controller-manager"),
          between(10259, 10259, "kube-scheduler"),
        ],
        egress: [{ protocol: "-1", fromPort: 0, toPort: 0, cidrBlocks: ["0.0.0.0/0"], description: "all outbound" }],
        tags: { ...args.tags, Name: name },
      },
      { parent: this },
    );
    this.id = sg.id;
    this.registerOutputs({ id: this.id });
  }
}
