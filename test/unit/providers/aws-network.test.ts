// The AWS reference network (infra/providers/aws/network.ts) under Pulumi's mocks: the
// resources and how they link, and that its moltAws output is a molt:aws section molt accepts.
import * as assert from "node:assert/strict";
import { AwsReferenceNetwork, awsSection, subnetPlan } from "../../../infra/providers/aws";
import { generateSshKeyPair } from "../../../infra/remote/ssh";
import { byType, clientKey, installMocks, one, reveal, settle, value, type Recorder } from "./harness";

let nextArn = 1;
const cloud = (type: string, name: string): Record<string, unknown> => {
  if (type.endsWith("molt:SshKeyPair")) return generateSshKeyPair(name);
  if (type === "aws:lb/loadBalancer:LoadBalancer")
    return {
      arn: `arn:aws:elasticloadbalancing:eu-central-1:123456789012:loadbalancer/net/${name}/0123456789abcdef`,
      dnsName: `${name}-0123.elb.eu-central-1.amazonaws.com`,
    };
  if (type === "aws:lb/targetGroup:TargetGroup")
    return {
      arn:
        "arn:aws:elasticloadbalancing:eu-central-1:123456789012:targetgroup/prod-api/" +
        (nextArn++).toString(16).padStart(16, "0"),
    };
  if (type === "aws:ec2/instance:Instance") return { publicIp: "203.0.113.7" };
  return {};
};

describe("AWS reference network (mocks)", () => {
  let rec: Recorder;
  let net: AwsReferenceNetwork;
  const zones = ["eu-central-1a", "eu-central-1b", "eu-central-1c"];
  before(async () => {
    rec = installMocks((type, name) => cloud(type, name));
    // Mock ids are `<name>-id`: give subnets and groups the prefixes AWS uses, as the schema checks them.
    net = new AwsReferenceNetwork("prod", {
      clusterName: "prod",
      region: "eu-central-1",
      zones,
      sshSourceCidrs: ["198.51.100.0/24"],
      bastion: { ami: "ami-0123456789abcdef0", user: "ubuntu" },
      sshPublicKey: clientKey.publicKey,
    });
    await value(net.moltAws);
    await settle();
  });

  const ids = (type: string) => byType(rec, type).map((r) => `${r.name}-id`);

  it("lays out a public and a private subnet per zone in one VPC", () => {
    assert.equal(one(rec, "aws:ec2/vpc:Vpc").inputs.cidrBlock, "10.0.0.0/16");
    const subnets = byType(rec, "aws:ec2/subnet:Subnet");
    assert.equal(subnets.length, 6);
    for (const s of subnets) assert.equal(s.inputs.vpcId, "prod-vpc-id");
    assert.deepEqual(
      subnets.filter((s) => s.name.includes("private")).map((s) => [s.inputs.availabilityZone, s.inputs.cidrBlock]),
      [
        ["eu-central-1a", "10.0.0.0/20"],
        ["eu-central-1b", "10.0.16.0/20"],
        ["eu-central-1c", "10.0.32.0/20"],
      ],
    );
  });

  it("routes the private subnets through one NAT gateway in a public subnet, the public ones to the internet", () => {
    const nat = one(rec, "aws:ec2/natGateway:NatGateway");
    assert.equal(nat.inputs.subnetId, "prod-public-eu-central-1a-id");
    assert.equal(nat.inputs.allocationId, "prod-nat-eu-central-1a-id");
    const tables = byType(rec, "aws:ec2/routeTable:RouteTable");
    const routes = (n: string) => tables.find((t) => t.name === n)!.inputs.routes as Record<string, unknown>[];
    assert.equal(routes("prod-public")[0].gatewayId, "prod-igw-id");
    for (const z of zones) assert.equal(routes(`prod-private-${z}`)[0].natGatewayId, nat.name + "-id");
    const assoc = byType(rec, "aws:ec2/routeTableAssociation:RouteTableAssociation");
    assert.equal(assoc.length, 6, "every subnet has its route table");
  });

  it("puts the API behind an internal NLB: TCP 6443, instance targets, client IP preservation off, /readyz", () => {
    const nlb = one(rec, "aws:lb/loadBalancer:LoadBalancer").inputs;
    assert.equal(nlb.loadBalancerType, "network");
    assert.equal(nlb.internal, true);
    assert.deepEqual(
      nlb.subnets,
      zones.map((z) => `prod-private-${z}-id`),
    );
    const tg = one(rec, "aws:lb/targetGroup:TargetGroup").inputs;
    assert.equal(tg.port, 6443);
    assert.equal(tg.protocol, "TCP");
    assert.equal(tg.targetType, "instance");
    assert.equal(tg.preserveClientIp, "false");
    assert.equal((tg.healthCheck as Record<string, unknown>).path, "/readyz");
    const l = one(rec, "aws:lb/listener:Listener").inputs;
    assert.equal(l.port, 6443);
    assert.match(String((l.defaultActions as Record<string, unknown>[])[0].targetGroupArn), /targetgroup\/prod-api\//);
  });

  it("admits the API from the NLB's subnets and SSH from the bastion's subnets only", () => {
    const sgs = byType(rec, "aws:ec2/securityGroup:SecurityGroup");
    const cp = sgs.find((s) => s.name === "prod-control-plane")!.inputs.ingress as Record<string, unknown>[];
    const lbRule = cp.find((r) => r.fromPort === 6443 && /load balancer/.test(String(r.description)));
    assert.deepEqual(lbRule?.cidrBlocks, ["10.0.0.0/20", "10.0.16.0/20", "10.0.32.0/20"]);
    assert.deepEqual(cp.find((r) => r.fromPort === 22)?.cidrBlocks, [
      "10.0.240.0/24",
      "10.0.241.0/24",
      "10.0.242.0/24",
    ]);
    const bastion = sgs.find((s) => s.name === "prod-bastion")!.inputs.ingress as Record<string, unknown>[];
    assert.deepEqual(
      bastion.map((r) => [r.fromPort, r.cidrBlocks]),
      [[22, ["198.51.100.0/24"]]],
    );
  });

  it("starts the bastion in a public subnet with its pinned host key installed by cloud-init", async () => {
    const i = one(rec, "aws:ec2/instance:Instance").inputs;
    assert.equal(i.subnetId, "prod-public-eu-central-1a-id");
    assert.equal(i.associatePublicIpAddress, true);
    const b = await value(net.bastion);
    assert.equal(b.host, "203.0.113.7");
    assert.match(b.hostKey, /^ssh-ed25519 /);
    assert.ok(String(reveal(i.userData)).includes(b.hostKey), "the pinned key is the one cloud-init installs");
  });

  it("outputs a molt:aws section molt's schema accepts, once ids have AWS's shapes", async () => {
    const out = await value(net.moltAws);
    // Mock ids lack AWS's prefixes (subnet-, sg-): map them as AWS would name them.
    const section = {
      ...out,
      subnetIdsByZone: Object.fromEntries(Object.entries(out.subnetIdsByZone).map(([z, id]) => [z, `subnet-${id}`])),
      securityGroupIds: out.securityGroupIds.map((id) => `sg-${id}`),
      instanceType: "m6i.large",
      rootVolume: { sizeGiB: 80 },
    };
    const parsed = awsSection.safeParse(section);
    assert.ok(parsed.success, JSON.stringify(parsed.error?.issues));
    assert.deepEqual(Object.keys(out.subnetIdsByZone), zones);
    assert.deepEqual(
      ids("aws:ec2/subnet:Subnet").filter((x) => x.includes("private")),
      Object.values(out.subnetIdsByZone),
    );
  });
});

describe("AWS reference network: bad input", () => {
  const rows: [string, string, string[], RegExp][] = [
    ["a /24 VPC", "10.0.0.0/24", ["a"], /vpcCidr "10.0.0.0\/24": give a \/16/],
    ["not a CIDR", "ten", ["a"], /give a \/16 such as 10.0.0.0\/16/],
    ["no zones", "10.0.0.0/16", [], /between 1 and 15 availability zones \(got 0\)/],
  ];
  for (const [name, cidr, zones, want] of rows) it(name, () => assert.throws(() => subnetPlan(cidr, zones), want));
});
