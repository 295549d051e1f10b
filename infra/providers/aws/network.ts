// A reference network for a molt cluster on an empty AWS account, laid out the way KubeOne's
// examples/terraform/aws lays out its own: a VPC, a public and a private subnet per zone, a
// NAT gateway for the private subnets' outbound traffic (packages, images), an internal
// network load balancer for the API (TCP 6443, client IP preservation off), the
// control-plane security group, and a bastion that molt's SSH goes through. Its `moltAws`
// output is a molt:aws section as it is; examples/aws-network runs it as a stack of its own.
import * as pulumi from "@pulumi/pulumi";
import { renderCloudInit } from "../cloud-common";
import { SshKeyPair } from "../../remote/keypair";
import { awsSdk } from "../sdk";
import { AwsControlPlaneSecurityGroup } from "./security-group";

export interface AwsReferenceNetworkArgs {
  /** The cluster's name: resource names and the kubernetes.io/cluster/<name> tag. */
  clusterName: string;
  region?: string;
  /** At least one zone; three for a cluster that survives the loss of one. */
  zones: string[];
  /** The VPC's range (default 10.0.0.0/16): each zone gets a /20 private and a /24 public subnet in it. */
  vpcCidr?: string;
  /** Where SSH to the bastion is allowed from (the machine that runs molt; your VPN). */
  sshSourceCidrs: string[];
  /** The bastion's AMI (any image with OpenSSH and cloud-init) and login user. */
  bastion: { ami: string; user: string; instanceType?: string };
  /** The SSH public key that may log in to the bastion (the public half of molt:ssh.privateKey). */
  sshPublicKey: pulumi.Input<string>;
  /**
   * One NAT gateway per zone (default false: one shared, as KubeOne's example: cheaper, but
   * an outage of its zone cuts every zone's egress).
   */
  natPerZone?: boolean;
  tags?: Record<string, string>;
}

/** The subnets of a /16 VPC: private /20s from .0, public /24s from .240. */
export function subnetPlan(vpcCidr: string, zones: readonly string[]): { zone: string; priv: string; pub: string }[] {
  const m = /^(\d+)\.(\d+)\.0\.0\/16$/.exec(vpcCidr);
  if (!m) throw new Error(`vpcCidr ${JSON.stringify(vpcCidr)}: give a /16 such as 10.0.0.0/16`);
  if (zones.length === 0 || zones.length > 15)
    throw new Error(`zones: give between 1 and 15 availability zones (got ${zones.length})`);
  const [a, b] = [m[1], m[2]];
  return zones.map((zone, i) => ({ zone, priv: `${a}.${b}.${i * 16}.0/20`, pub: `${a}.${b}.${240 + i}.0/24` }));
}

/** The network part of a molt:aws section. */
export interface MoltAwsNetworkSection {
  region?: string;
  subnetIdsByZone: Record<string, string>;
  securityGroupIds: string[];
  loadBalancer: { targetGroupArn: string };
}

export class AwsReferenceNetwork extends pulumi.ComponentResource {
  readonly vpcId: pulumi.Output<string>;
  /** The NLB's DNS name: molt:bootstrap.controlPlaneEndpoint (with :6443) and a certificate SAN. */
  readonly apiDnsName: pulumi.Output<string>;
  readonly targetGroupArn: pulumi.Output<string>;
  readonly securityGroupId: pulumi.Output<string>;
  readonly privateSubnetIds: Record<string, pulumi.Output<string>>;
  /** molt:ssh.bastion: the bastion's public address, user and pinned host key. */
  readonly bastion: pulumi.Output<{ host: string; port: number; user: string; hostKey: string }>;
  /** A molt:aws section for the cluster's stack (instance type and volume are the user's). */
  readonly moltAws: pulumi.Output<MoltAwsNetworkSection>;

  constructor(name: string, args: AwsReferenceNetworkArgs, opts?: pulumi.ComponentResourceOptions) {
    super("molt:aws:ReferenceNetwork", name, {}, opts);
    const aws = awsSdk();
    const plan = subnetPlan(args.vpcCidr ?? "10.0.0.0/16", args.zones);
    const region = args.region ? { region: args.region } : {};
    const tags = (n: string) => ({ ...args.tags, Name: n, [`kubernetes.io/cluster/${args.clusterName}`]: "shared" });
    const p = { parent: this };

    const vpc = new aws.ec2.Vpc(
      `${name}-vpc`,
      {
        ...region,
        cidrBlock: args.vpcCidr ?? "10.0.0.0/16",
        enableDnsHostnames: true,
        enableDnsSupport: true,
        tags: tags(`${name}-vpc`),
      },
      p,
    );
    const igw = new aws.ec2.InternetGateway(`${name}-igw`, { ...region, vpcId: vpc.id, tags: tags(`${name}-igw`) }, p);
    const publicRt = new aws.ec2.RouteTable(
      `${name}-public`,
      {
        ...region,
        vpcId: vpc.id,
        routes: [{ cidrBlock: "0.0.0.0/0", gatewayId: igw.id }],
        tags: tags(`${name}-public`),
      },
      p,
    );

    const publicSubnets = plan.map((z) => {
      const s = new aws.ec2.Subnet(
        `${name}-public-${z.zone}`,
        {
          ...region,
          vpcId: vpc.id,
          availabilityZone: z.zone,
          cidrBlock: z.pub,
          mapPublicIpOnLaunch: false,
          // Where the cloud controller puts internet-facing Service load balancers.
          tags: { ...tags(`${name}-public-${z.zone}`), "kubernetes.io/role/elb": "1" },
        },
        p,
      );
      new aws.ec2.RouteTableAssociation(
        `${name}-public-${z.zone}`,
        { ...region, subnetId: s.id, routeTableId: publicRt.id },
        p,
      );
      return s;
    });

    const nats = (args.natPerZone ? plan : plan.slice(0, 1)).map((z, i) => {
      const eip = new aws.ec2.Eip(
        `${name}-nat-${z.zone}`,
        { ...region, domain: "vpc", tags: tags(`${name}-nat-${z.zone}`) },
        p,
      );
      return new aws.ec2.NatGateway(
        `${name}-nat-${z.zone}`,
        { ...region, allocationId: eip.id, subnetId: publicSubnets[i].id, tags: tags(`${name}-nat-${z.zone}`) },
        { parent: this, dependsOn: [igw] },
      );
    });

    const privateSubnetIds: Record<string, pulumi.Output<string>> = {};
    plan.forEach((z, i) => {
      const s = new aws.ec2.Subnet(
        `${name}-private-${z.zone}`,
        {
          ...region,
          vpcId: vpc.id,
          availabilityZone: z.zone,
          cidrBlock: z.priv,
          tags: { ...tags(`${name}-private-${z.zone}`), "kubernetes.io/role/internal-elb": "1" },
        },
        p,
      );
      const rt = new aws.ec2.RouteTable(
        `${name}-private-${z.zone}`,
        {
          ...region,
          vpcId: vpc.id,
          routes: [{ cidrBlock: "0.0.0.0/0", natGatewayId: nats[args.natPerZone ? i : 0].id }],
          tags: tags(`${name}-private-${z.zone}`),
        },
        p,
      );
      new aws.ec2.RouteTableAssociation(
        `${name}-private-${z.zone}`,
        { ...region, subnetId: s.id, routeTableId: rt.id },
        p,
      );
      privateSubnetIds[z.zone] = s.id;
    });

    // The API: an internal NLB over the private subnets. Client IP preservation off, or a
    // node reaching the API through the NLB is dropped when the NLB picks that same node.
    const nlb = new aws.lb.LoadBalancer(
      `${name}-api`,
      {
        ...region,
        name: `${args.clusterName}-api`.slice(0, 32),
        loadBalancerType: "network",
        internal: true,
        subnets: Object.values(privateSubnetIds),
        enableCrossZoneLoadBalancing: true,
        tags: tags(`${name}-api`),
      },
      p,
    );
    const tg = new aws.lb.TargetGroup(
      `${name}-api`,
      {
        ...region,
        name: `${args.clusterName}-api`.slice(0, 32),
        port: 6443,
        protocol: "TCP",
        targetType: "instance",
        vpcId: vpc.id,
        preserveClientIp: "false",
        // A target leaves within the deregistration delay; molt waits for it before it stops a retiring API server.
        deregistrationDelay: 30,
        healthCheck: {
          protocol: "HTTPS",
          port: "6443",
          path: "/readyz",
          interval: 10,
          healthyThreshold: 2,
          unhealthyThreshold: 2,
        },
        tags: tags(`${name}-api`),
      },
      p,
    );
    new aws.lb.Listener(
      `${name}-api`,
      {
        ...region,
        loadBalancerArn: nlb.arn,
        port: 6443,
        protocol: "TCP",
        defaultActions: [{ type: "forward", targetGroupArn: tg.arn }],
        tags: tags(`${name}-api`),
      },
      p,
    );

    const sg = new AwsControlPlaneSecurityGroup(
      `${name}-control-plane`,
      {
        ...region,
        vpcId: vpc.id,
        // The API from inside the VPC (workers, the bastion's tunnels); the NLB's health checks come from its subnets.
        apiSourceCidrs: [args.vpcCidr ?? "10.0.0.0/16"],
        loadBalancerSubnetCidrs: plan.map((z) => z.priv),
        // molt reaches the nodes through the bastion, which sits in the public subnets.
        sshSourceCidrs: plan.map((z) => z.pub),
        tags: tags(`${name}-control-plane`),
      },
      p,
    );

    // The bastion: the only machine with a public address; its host key is made here and
    // installed by cloud-init, so molt pins it from the first connection.
    const bastionSg = new aws.ec2.SecurityGroup(
      `${name}-bastion`,
      {
        ...region,
        vpcId: vpc.id,
        description: "molt: SSH bastion",
        ingress: [{ protocol: "tcp", fromPort: 22, toPort: 22, cidrBlocks: args.sshSourceCidrs, description: "SSH" }],
        egress: [{ protocol: "-1", fromPort: 0, toPort: 0, cidrBlocks: ["0.0.0.0/0"], description: "all outbound" }],
        tags: tags(`${name}-bastion`),
      },
      p,
    );
    const hostKey = new SshKeyPair(`${name}-bastion-hostkey`, { comment: `host key of ${name}-bastion` }, p);
    const bastion = new aws.ec2.Instance(
      `${name}-bastion`,
      {
        ...region,
        ami: args.bastion.ami,
        instanceType: args.bastion.instanceType ?? "t3.micro",
        subnetId: publicSubnets[0].id,
        availabilityZone: plan[0].zone,
        vpcSecurityGroupIds: [bastionSg.id],
        associatePublicIpAddress: true,
        metadataOptions: { httpEndpoint: "enabled", httpTokens: "required", httpPutResponseHopLimit: 1 },
        userData: pulumi.secret(
          pulumi
            .all([args.sshPublicKey, hostKey.privateKey, hostKey.publicKey])
            .apply(([authorizedKey, privateKey, publicKey]) =>
              renderCloudInit({
                hostname: `${name}-bastion`,
                user: args.bastion.user,
                authorizedKey,
                hostKey: { privateKey, publicKey },
              }),
            ),
        ),
        tags: tags(`${name}-bastion`),
      },
      { parent: this, ignoreChanges: ["userData"] },
    );

    this.vpcId = vpc.id;
    this.apiDnsName = nlb.dnsName;
    this.targetGroupArn = tg.arn;
    this.securityGroupId = sg.id;
    this.privateSubnetIds = privateSubnetIds;
    this.bastion = pulumi
      .all([bastion.publicIp, hostKey.publicKey])
      .apply(([host, key]) => ({ host, port: 22, user: args.bastion.user, hostKey: key }));
    this.moltAws = pulumi
      .all([pulumi.all(privateSubnetIds), sg.id, tg.arn])
      .apply(([subnets, sgId, tgArn]): MoltAwsNetworkSection => ({
        ...(args.region ? { region: args.region } : {}),
        subnetIdsByZone: subnets,
        securityGroupIds: [sgId],
        loadBalancer: { targetGroupArn: tgArn },
      }));
    this.registerOutputs({
      vpcId: this.vpcId,
      apiDnsName: this.apiDnsName,
      targetGroupArn: this.targetGroupArn,
      securityGroupId: this.securityGroupId,
      bastion: this.bastion,
      moltAws: this.moltAws,
    });
  }
}
