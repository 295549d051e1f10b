import * as assert from "node:assert/strict";
import * as pulumi from "@pulumi/pulumi";
import { AwsControlPlaneNode, AwsControlPlaneSecurityGroup, type AwsNodeSettings } from "../../../infra/providers/aws";
import { shellcheck } from "../kubeadm/shell";
import {
  DYNAMIC,
  JOIN,
  bootstrapOf,
  clientKey,
  fixtures,
  hostKeyA,
  installMocks,
  isSecret,
  isSecretValue,
  one,
  reveal,
  settle,
  strings,
  value,
  type Recorder,
} from "./harness";

const settings: AwsNodeSettings = {
  instanceType: "m6i.large",
  subnetIdsByZone: { "eu-central-1a": "subnet-a", "eu-central-1b": "subnet-b", "eu-central-1c": "subnet-c" },
  securityGroupIds: ["sg-cp"],
  loadBalancer: {
    targetGroupArn: "arn:aws:elasticloadbalancing:eu-central-1:123456789012:targetgroup/api/0123456789abcdef",
  },
  rootVolume: { sizeGiB: 80, iops: 4000 },
};

const cloud = (type: string, name: string, inputs: Record<string, unknown>) =>
  type === "aws:ec2/instance:Instance"
    ? { privateIp: "10.0.1.15", publicIp: "", availabilityZone: inputs.availabilityZone, arn: `arn:${name}` }
    : {};

function build(rec: Recorder, overrides: Parameters<typeof fixtures>[0] = {}, extra: Partial<AwsNodeSettings> = {}) {
  const f = fixtures(overrides);
  return new AwsControlPlaneNode(
    f.node.name,
    { ...f, settings: { ...settings, ...extra }, joinMaterial: pulumi.secret(JOIN) },
    { transformations: [rec.transformation] },
  );
}

describe("AWS control-plane node", () => {
  let rec: Recorder;
  let node: AwsControlPlaneNode;
  before(async () => {
    rec = installMocks(cloud);
    node = build(rec, { failureDomain: "eu-central-1b" });
    await value(node.providerId);
    await settle();
  });

  it("creates an EC2 instance from the node's AMI in the subnet of its availability zone", () => {
    const i = one(rec, "aws:ec2/instance:Instance").inputs;
    assert.equal(i.ami, "ami-0123456789abcdef0");
    assert.equal(i.subnetId, "subnet-b");
    assert.equal(i.availabilityZone, "eu-central-1b");
    assert.deepEqual(i.vpcSecurityGroupIds, ["sg-cp"]);
    assert.equal(i.instanceType, "m6i.large");
  });

  it("requires IMDSv2 and keeps instance metadata away from containers", () => {
    assert.deepEqual(one(rec, "aws:ec2/instance:Instance").inputs.metadataOptions, {
      httpEndpoint: "enabled",
      httpTokens: "required",
      httpPutResponseHopLimit: 1,
    });
  });

  it("gives the root volume its size, gp3 type, IOPS and encryption", () => {
    const v = one(rec, "aws:ec2/instance:Instance").inputs.rootBlockDevice as Record<string, unknown>;
    assert.equal(v.volumeSize, 80);
    assert.equal(v.volumeType, "gp3");
    assert.equal(v.iops, 4000);
    assert.equal(v.encrypted, true);
    assert.equal(v.deleteOnTermination, true);
  });

  it("registers the instance in the API target group on 6443", () => {
    const a = one(rec, "aws:lb/targetGroupAttachment:TargetGroupAttachment").inputs;
    assert.equal(a.targetGroupArn, (settings.loadBalancer as { targetGroupArn: string }).targetGroupArn);
    assert.equal(a.targetId, "cp-g2-a-id");
    assert.equal(a.port, 6443);
  });

  it("installs the pre-generated host key through user data, as a secret", async () => {
    const raw = one(rec, "aws:ec2/instance:Instance").inputs.userData;
    assert.ok(isSecretValue(raw));
    const userData = String(reveal(raw));
    assert.match(userData, /^#cloud-config\n/);
    assert.ok(userData.includes(hostKeyA.publicKey.trim()));
    assert.ok(userData.includes("ssh_deletekeys: true"));
    assert.ok(userData.includes("HostKey /etc/ssh/ssh_host_ed25519_key"));
    const props = rec.transformed.find((t) => t.type === "aws:ec2/instance:Instance");
    assert.ok(await isSecret(props?.props.userData));
  });

  it("pins the node's host key in the bootstrap command's connection", () => {
    const c = reveal(bootstrapOf(rec, "cp-g2-a").inputs.connection) as Record<string, unknown>;
    assert.equal(c.hostKey, hostKeyA.publicKey);
    assert.equal(c.host, "10.0.1.15");
    assert.equal(c.user, "ubuntu");
  });

  it("joins with kubeadm join --control-plane on create and resets on delete, both shellcheck-clean", () => {
    const cmd = bootstrapOf(rec, "cp-g2-a").inputs;
    assert.match(String(cmd.create), /kubeadm join --config/);
    assert.match(String(cmd.create), /advertiseAddress: 10\.0\.1\.15/);
    assert.match(String(cmd.delete), /kubeadm reset --force/);
    assert.equal(shellcheck(String(cmd.create)), "");
    assert.equal(shellcheck(String(cmd.delete)), "");
  });

  it("hands the join material to the join script on stdin only, as a secret", async () => {
    const cmd = bootstrapOf(rec, "cp-g2-a").inputs;
    assert.ok(isSecretValue(cmd.stdin));
    assert.equal(
      reveal(cmd.stdin),
      `token=${JOIN.token}\ncertificateKey=${JOIN.certificateKey}\ncaCertHash=${JOIN.caCertHash}\n`,
    );
    const raw = rec.transformed.find((t) => t.type === DYNAMIC && t.name === "cp-g2-a-kubeadm");
    assert.ok(await isSecret(raw?.props.stdin));
    assert.deepEqual(raw?.opts && (raw.opts as pulumi.CustomResourceOptions).additionalSecretOutputs, [
      "connection",
      "stdin",
    ]);
  });

  it("keeps secrets out of every script, trigger and non-secret input", () => {
    const secrets = [
      JOIN.token,
      JOIN.certificateKey,
      clientKey.privateKey.split("\n")[1],
      hostKeyA.privateKey.split("\n")[1],
    ];
    const cmd = bootstrapOf(rec, "cp-g2-a").inputs;
    const visible = [cmd.create, cmd.delete, cmd.environment, cmd.triggers];
    const others = rec.resources
      .filter((r) => r.type !== DYNAMIC)
      .map((r) => Object.values(r.inputs).filter((v) => !isSecretValue(v)));
    for (const s of strings([visible, others]))
      for (const secret of secrets) assert.ok(!s.includes(secret), "a secret leaked into a visible input");
  });

  it("exposes the node's addresses, pinned key and Kubernetes provider id", async () => {
    assert.equal(await value(node.privateAddress), "10.0.1.15");
    assert.equal(await value(node.sshHost), "10.0.1.15");
    assert.equal(await value(node.sshPort), 22);
    assert.equal(await value(node.hostPublicKey), hostKeyA.publicKey);
    assert.equal(await value(node.providerId), "aws:///eu-central-1b/cp-g2-a-id");
  });

  it(
    "replaces the machine rather than updating it when its AMI would change, and keeps its user data as " + "created",
    () => {
      const opts = rec.transformed.find((t) => t.type === "aws:ec2/instance:Instance")?.opts;
      assert.deepEqual(opts?.replaceOnChanges, ["ami"]);
      assert.deepEqual(opts?.ignoreChanges, ["userData"]);
    },
  );

  it("bootstraps again (reset, then join) only when the machine, image or version changes", () => {
    assert.deepEqual(bootstrapOf(rec, "cp-g2-a").inputs.triggers, ["cp-g2-a-id", "ami-0123456789abcdef0", "1.34.2"]);
  });
});

describe("AWS control-plane node behind a classic ELB, and for a cloud controller manager", () => {
  it(
    "registers the instance in the classic ELB by name (deleted " + "with the node: deregistered), no target group",
    async () => {
      const rec = installMocks(cloud);
      const node = build(rec, {}, { loadBalancer: { classicElb: "kubeone-api-lb" }, region: "eu-west-1" });
      await value(node.providerId);
      await settle();
      const a = one(rec, "aws:elb/attachment:Attachment", "cp-g2-a-api").inputs;
      assert.deepEqual([a.elb, a.instance, a.region], ["kubeone-api-lb", "cp-g2-a-id", "eu-west-1"]);
      assert.equal(
        rec.resources.filter((r) => r.type === "aws:lb/targetGroupAttachment:TargetGroupAttachment").length,
        0,
      );
      const parent = rec.transformed.find((t) => t.name === "cp-g2-a-api")?.opts.parent;
      assert.equal(parent, node, "a child of the node: the update that drops the node deletes it");
    },
  );

  it(
    "tags the instance and its volume " + "kubernetes.io/cluster/<cluster>: owned by default, shared when asked",
    async () => {
      for (const [extra, expected] of [
        [{}, "owned"],
        [{ clusterTag: "shared" as const }, "shared"],
      ] as const) {
        const rec = installMocks(cloud);
        await value(build(rec, {}, extra).providerId);
        await settle();
        const i = one(rec, "aws:ec2/instance:Instance").inputs;
        assert.equal((i.tags as Record<string, string>)["kubernetes.io/cluster/prod"], expected);
        const volume = (i.rootBlockDevice as { tags: Record<string, string> }).tags;
        assert.equal(volume["kubernetes.io/cluster/prod"], expected);
      }
    },
  );

  it(
    "gives the kubelet its providerID (aws:///ZONE/INSTANCE) through a " +
      "kubeadm patch, and --cloud-provider=external only when asked",
    async () => {
      const rec = installMocks(cloud);
      const f = fixtures({ failureDomain: "eu-central-1c" });
      const node = new AwsControlPlaneNode(
        f.node.name,
        { ...f, bootstrap: { ...f.bootstrap, cloudProvider: "external" }, settings, joinMaterial: pulumi.secret(JOIN) },
        {},
      );
      await value(node.providerId);
      await settle();
      const create = String(bootstrapOf(rec, "cp-g2-a").inputs.create);
      assert.match(create, /providerID: aws:\/\/\/eu-central-1c\/cp-g2-a-id/);
      assert.match(create, /patches:\n\s+directory: \/etc\/kubernetes\/molt-patches/);
      assert.match(create, /- name: cloud-provider\n\s+value: external/);
      const plain = installMocks(cloud);
      await value(build(plain).providerId);
      await settle();
      const without = String(bootstrapOf(plain, "cp-g2-a").inputs.create);
      assert.doesNotMatch(without, /cloud-provider/);
      assert.match(without, /providerID: aws:\/\/\/eu-central-1a\/cp-g2-a-id/, "set whether or not a CCM runs");
    },
  );
});

describe("AWS control-plane node identity across runs and images", () => {
  it("names every resource after the node, the same on every run", async () => {
    const names = async () => {
      const rec = installMocks(cloud);
      await value(build(rec).providerId);
      await settle();
      return rec.resources.map((r) => `${r.type}/${r.name}`).sort();
    };
    const first = await names();
    assert.deepEqual(await names(), first);
    assert.ok(first.includes("aws:ec2/instance:Instance/cp-g2-a"));
  });

  it("makes a node with a new image an entirely new set of resources", async () => {
    const rec = installMocks(cloud);
    const a = build(rec);
    const b = build(rec, { name: "cp-g3-a", image: "ami-0fedcba9876543210", generation: 3 });
    await Promise.all([value(a.providerId), value(b.providerId)]);
    await settle();
    const of = (node: string) => new Set(rec.resources.filter((r) => r.name.startsWith(node)).map((r) => r.name));
    const old = of("cp-g2-a");
    assert.ok([...of("cp-g3-a")].every((n) => !old.has(n)));
    assert.equal(
      rec.resources.filter((r) => r.type === "aws:ec2/instance:Instance" && r.inputs.ami === "ami-0fedcba9876543210")
        .length,
      1,
    );
  });
});

describe("AWS first node of a brand-new cluster", () => {
  it("runs kubeadm init and needs no join material", async () => {
    const rec = installMocks(cloud);
    const f = fixtures({ name: "cp-g1-a", init: true });
    const node = new AwsControlPlaneNode("cp-g1-a", { ...f, settings }, {});
    await value(node.providerId);
    await settle();
    const cmd = bootstrapOf(rec, "cp-g1-a").inputs;
    assert.match(String(cmd.create), /kubeadm init --config "\$MOLT_TMP" --upload-certs/);
    assert.equal(cmd.stdin, undefined);
  });

  it("refuses a joining node without join material or a seed node", () => {
    installMocks(cloud);
    const f = fixtures();
    assert.throws(() => new AwsControlPlaneNode("cp-g2-a", { ...f, settings }), /neither joinMaterial nor a seed/);
  });

  it("refuses a zone without a subnet, naming the zones that have one", () => {
    installMocks(cloud);
    const f = fixtures({ failureDomain: "eu-central-1d" });
    assert.throws(
      () => new AwsControlPlaneNode("cp-g2-a", { ...f, settings, joinMaterial: JOIN }),
      /eu-central-1d.*eu-central-1a, eu-central-1b, eu-central-1c/,
    );
  });
});

describe("AWS control-plane security group", () => {
  it(
    "opens the API to the given sources and etcd, kubelet and controllers only between control-plane " + "nodes",
    async () => {
      const rec = installMocks(() => ({}));
      const sg = new AwsControlPlaneSecurityGroup("prod-cp", {
        vpcId: "vpc-1",
        apiSourceCidrs: ["10.0.0.0/16"],
        sshSourceCidrs: ["10.9.0.0/24"],
      });
      await value(sg.id);
      await settle();
      const ingress = one(rec, "aws:ec2/securityGroup:SecurityGroup").inputs.ingress as Array<Record<string, unknown>>;
      const rule = (port: number, self: boolean) =>
        ingress.find((r) => r.fromPort === port && Boolean(r.self) === self);
      assert.deepEqual(rule(6443, false)?.cidrBlocks, ["10.0.0.0/16"]);
      assert.deepEqual(rule(22, false)?.cidrBlocks, ["10.9.0.0/24"]);
      assert.equal(rule(2379, true)?.toPort, 2380);
      assert.equal(rule(2379, false), undefined);
      assert.ok(rule(10250, true));
    },
  );
});
