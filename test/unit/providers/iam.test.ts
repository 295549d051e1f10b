// The IAM policies in docs/iam/ grant what molt's AWS code uses: every AWS SDK class or
// invoke the provider code names, and every EC2 and Elastic Load Balancing command the
// orchestrator sends (orchestrator/edges/aws-*.ts), maps to the actions it needs, and the
// policy file grants each. A new AWS resource in the code fails here
// until the table and the policy say what it needs.
import * as assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

const root = join(__dirname, "..", "..", "..", "..");

/** What the Pulumi AWS provider (terraform-provider-aws underneath) calls for each resource or invoke. */
const NEEDS: Record<string, string[]> = {
  "ec2.Instance": [
    "ec2:RunInstances",
    "ec2:TerminateInstances",
    "ec2:DescribeInstances",
    "ec2:DescribeInstanceAttribute",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeInstanceCreditSpecifications",
    "ec2:DescribeVolumes",
    "ec2:DescribeTags",
    "ec2:CreateTags",
    "ec2:DeleteTags",
    "ec2:ModifyInstanceAttribute",
  ],
  "lb.TargetGroupAttachment": [
    "elasticloadbalancing:RegisterTargets",
    "elasticloadbalancing:DeregisterTargets",
    "elasticloadbalancing:DescribeTargetHealth",
  ],
  "elb.Attachment": [
    "elasticloadbalancing:RegisterInstancesWithLoadBalancer",
    "elasticloadbalancing:DeregisterInstancesFromLoadBalancer",
    "elasticloadbalancing:DescribeLoadBalancers",
  ],
  "elb.getLoadBalancer": [
    "elasticloadbalancing:DescribeLoadBalancers",
    "elasticloadbalancing:DescribeLoadBalancerAttributes",
    "elasticloadbalancing:DescribeTags",
  ],
  "lb.getTargetGroup": [
    "elasticloadbalancing:DescribeTargetGroups",
    "elasticloadbalancing:DescribeTargetGroupAttributes",
    "elasticloadbalancing:DescribeTags",
  ],
  "lb.getLoadBalancer": [
    "elasticloadbalancing:DescribeLoadBalancers",
    "elasticloadbalancing:DescribeLoadBalancerAttributes",
    "elasticloadbalancing:DescribeTags",
  ],
  "ec2.SecurityGroup": [
    "ec2:CreateSecurityGroup",
    "ec2:DeleteSecurityGroup",
    "ec2:DescribeSecurityGroups",
    "ec2:AuthorizeSecurityGroupIngress",
    "ec2:AuthorizeSecurityGroupEgress",
    "ec2:RevokeSecurityGroupIngress",
    "ec2:RevokeSecurityGroupEgress",
    "ec2:CreateTags",
  ],
  "ec2.Vpc": [
    "ec2:CreateVpc",
    "ec2:DeleteVpc",
    "ec2:DescribeVpcs",
    "ec2:ModifyVpcAttribute",
    "ec2:DescribeVpcAttribute",
  ],
  "ec2.Subnet": ["ec2:CreateSubnet", "ec2:DeleteSubnet", "ec2:DescribeSubnets", "ec2:ModifySubnetAttribute"],
  "ec2.InternetGateway": [
    "ec2:CreateInternetGateway",
    "ec2:DeleteInternetGateway",
    "ec2:AttachInternetGateway",
    "ec2:DetachInternetGateway",
    "ec2:DescribeInternetGateways",
  ],
  "ec2.Eip": ["ec2:AllocateAddress", "ec2:ReleaseAddress", "ec2:DescribeAddresses", "ec2:DisassociateAddress"],
  "ec2.NatGateway": ["ec2:CreateNatGateway", "ec2:DeleteNatGateway", "ec2:DescribeNatGateways"],
  "ec2.RouteTable": [
    "ec2:CreateRouteTable",
    "ec2:DeleteRouteTable",
    "ec2:CreateRoute",
    "ec2:DeleteRoute",
    "ec2:DescribeRouteTables",
  ],
  "ec2.RouteTableAssociation": ["ec2:AssociateRouteTable", "ec2:DisassociateRouteTable"],
  "lb.LoadBalancer": [
    "elasticloadbalancing:CreateLoadBalancer",
    "elasticloadbalancing:DeleteLoadBalancer",
    "elasticloadbalancing:DescribeLoadBalancers",
    "elasticloadbalancing:ModifyLoadBalancerAttributes",
    "elasticloadbalancing:AddTags",
  ],
  "lb.TargetGroup": [
    "elasticloadbalancing:CreateTargetGroup",
    "elasticloadbalancing:DeleteTargetGroup",
    "elasticloadbalancing:DescribeTargetGroups",
    "elasticloadbalancing:ModifyTargetGroupAttributes",
    "elasticloadbalancing:AddTags",
  ],
  "lb.Listener": [
    "elasticloadbalancing:CreateListener",
    "elasticloadbalancing:DeleteListener",
    "elasticloadbalancing:DescribeListeners",
    "elasticloadbalancing:AddTags",
  ],
  // The orchestrator's own EC2 calls (orchestrator/edges/aws-inventory.ts).
  DescribeInstancesCommand: ["ec2:DescribeInstances"],
  TerminateInstancesCommand: ["ec2:TerminateInstances"],
  // Retirement behind the API load balancer (orchestrator/edges/aws-elb.ts): ELBv2 ...
  DescribeTargetHealthCommand: ["elasticloadbalancing:DescribeTargetHealth"],
  DeregisterTargetsCommand: ["elasticloadbalancing:DeregisterTargets"],
  RegisterTargetsCommand: ["elasticloadbalancing:RegisterTargets"],
  DescribeTargetGroupsCommand: ["elasticloadbalancing:DescribeTargetGroups"],
  DescribeTargetGroupAttributesCommand: ["elasticloadbalancing:DescribeTargetGroupAttributes"],
  // ... and the classic ELB API.
  DescribeInstanceHealthCommand: ["elasticloadbalancing:DescribeInstanceHealth"],
  DeregisterInstancesFromLoadBalancerCommand: ["elasticloadbalancing:DeregisterInstancesFromLoadBalancer"],
  RegisterInstancesWithLoadBalancerCommand: ["elasticloadbalancing:RegisterInstancesWithLoadBalancer"],
  DescribeLoadBalancersCommand: ["elasticloadbalancing:DescribeLoadBalancers"],
  DescribeLoadBalancerAttributesCommand: ["elasticloadbalancing:DescribeLoadBalancerAttributes"],
};

/** The files of the reference network (docs/iam/aws-network.json); everything else is molt's (aws-molt.json). */
const NETWORK_FILES = new Set(["network.ts", "security-group.ts"]);

function sdkUses(file: string): string[] {
  const src = readFileSync(file, "utf8");
  const uses = new Set<string>();
  for (const m of src.matchAll(/\b(?:sdk|aws)\.(ec2|lb|elb|iam|kms|s3)\.(\w+)\b/g)) uses.add(`${m[1]}.${m[2]}`);
  for (const m of src.matchAll(/\bnew (\w+Command)\(/g)) uses.add(m[1]);
  return [...uses];
}

function granted(policyFile: string): (action: string) => boolean {
  const policy = JSON.parse(readFileSync(join(root, "docs", "iam", policyFile), "utf8")) as {
    Statement: { Effect: string; Action: string | string[] }[];
  };
  const patterns = policy.Statement.filter((s) => s.Effect === "Allow").flatMap((s) =>
    (Array.isArray(s.Action) ? s.Action : [s.Action]).map(
      (a) => new RegExp(`^${a.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*")}$`, "i"),
    ),
  );
  return (action) => patterns.some((p) => p.test(action));
}

describe("IAM policies in docs/iam/ cover what molt's AWS code calls", () => {
  const awsDir = join(root, "infra", "providers", "aws");
  const edgesDir = join(root, "orchestrator", "edges");
  const files = [
    ...readdirSync(awsDir)
      .filter((f) => f.endsWith(".ts"))
      .map((f) => ({ file: join(awsDir, f), network: NETWORK_FILES.has(f) })),
    // molt's own AWS calls: every AWS edge of the orchestrator.
    ...readdirSync(edgesDir)
      .filter((f) => /^aws-.*\.ts$/.test(f))
      .map((f) => ({ file: join(edgesDir, f), network: false })),
  ];

  it("every SDK class, invoke and EC2 command in the code is in the table", () => {
    const unknown = files.flatMap((f) =>
      sdkUses(f.file)
        .filter((u) => !NEEDS[u])
        .map((u) => `${u} (${f.file})`),
    );
    assert.deepEqual(unknown, [], "add what each needs to NEEDS and to the policy in docs/iam/");
    assert.ok(sdkUses(join(awsDir, "node.ts")).includes("ec2.Instance"), "the scan finds the node's instance");
  });

  it("the scan finds every Elastic Load Balancing call of retirement (orchestrator/edges/aws-elb.ts)", () => {
    const scanned = files.find((f) => f.file.endsWith("aws-elb.ts"));
    assert.ok(scanned, "orchestrator/edges/aws-elb.ts is scanned");
    assert.deepEqual(sdkUses(scanned.file).sort(), [
      "DeregisterInstancesFromLoadBalancerCommand",
      "DeregisterTargetsCommand",
      "DescribeInstanceHealthCommand",
      "DescribeLoadBalancerAttributesCommand",
      "DescribeLoadBalancersCommand",
      "DescribeTargetGroupAttributesCommand",
      "DescribeTargetGroupsCommand",
      "DescribeTargetHealthCommand",
      "RegisterInstancesWithLoadBalancerCommand",
      "RegisterTargetsCommand",
    ]);
  });

  for (const [policy, network] of [
    ["aws-molt.json", false],
    ["aws-network.json", true],
  ] as const)
    it(`${policy} grants every action its code needs`, () => {
      const grants = granted(policy);
      const missing = files
        .filter((f) => f.network === network)
        .flatMap((f) =>
          sdkUses(f.file).flatMap((u) => (NEEDS[u] ?? []).filter((a) => !grants(a)).map((a) => `${a} (${u})`)),
        );
      assert.deepEqual([...new Set(missing)], []);
    });

  it("molt.s own policy grants termination but creates no network", () => {
    const grants = granted("aws-molt.json");
    assert.ok(grants("ec2:TerminateInstances"));
    assert.ok(!grants("ec2:CreateVpc"), "molt's own policy does not create networks");
  });
});
