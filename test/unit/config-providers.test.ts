// Cloud sections of stacks/Pulumi.<stack>.yaml (orchestrator/config/index.ts): typed settings
// for the stack program, and every bad value named by its key before anything runs.
import * as assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse, stringify } from "yaml";
import { InvalidConfigError, loadStackConfig, stackConfigPath, type StackConfig } from "../../orchestrator/config";

const repo = [process.cwd(), join(__dirname, "..", "..", "..")].find((r) =>
  existsSync(join(r, "stacks", "Pulumi.lab.yaml")),
)!;
const example = (provider: string): Record<string, unknown> =>
  (parse(readFileSync(join(repo, "stacks", `Pulumi.${provider}.yaml`), "utf8")) as { config: Record<string, unknown> })
    .config;

describe("cloud sections of the stack configuration (orchestrator/config/index.ts)", () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "molt-config-providers-"));
    mkdirSync(join(dir, "stacks"));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const load = (config: Record<string, unknown>, stack = "prod"): StackConfig => {
    writeFileSync(stackConfigPath(dir, stack), stringify({ config }));
    return loadStackConfig(dir, stack);
  };
  /** The problems of a config that must be refused. */
  const problemsOf = (config: Record<string, unknown>): string[] => {
    try {
      load(config);
    } catch (e) {
      assert.ok(e instanceof InvalidConfigError, String(e));
      assert.match(e.message, /nothing was changed/);
      return e.problems;
    }
    assert.fail("the configuration was accepted");
  };
  /** The example stack of `provider` with `path` (a.b.c) set, or removed when value is undefined. */
  const edited = (provider: string, path: string, value: unknown): Record<string, unknown> => {
    const c = structuredClone(example(provider));
    const [top, ...rest] = path.split(".");
    let at: Record<string, unknown> = c;
    const keys = [top, ...rest];
    for (const k of keys.slice(0, -1)) at = at[k] as Record<string, unknown>;
    const last = keys[keys.length - 1];
    if (value === undefined) delete at[last];
    else at[last] = value;
    return c;
  };
  const assertProblem = (problems: string[], key: string, pattern: RegExp) =>
    assert.ok(
      problems.some((p) => p.startsWith(`${key}: `) && pattern.test(p)),
      `no problem "${key}: ${pattern.source}" in ${JSON.stringify(problems, null, 1)}`,
    );

  describe("the example stacks", () => {
    it(
      "stacks/Pulumi.aws.yaml: typed AWS settings, zones as failure domains, the SSH user without a key in the " +
        "clear",
      () => {
        const c = load(example("aws"));
        assert.equal(c.lab, undefined);
        assert.equal(c.sshUser, "ubuntu");
        assert.ok(c.cloud?.provider === "aws");
        assert.deepEqual(c.cloud.ssh, { user: "ubuntu" });
        assert.deepEqual(c.cloud.failureDomains, ["eu-central-1a", "eu-central-1b", "eu-central-1c"]);
        assert.equal(c.cloud.aws.instanceType, "m6i.large");
        assert.deepEqual(Object.keys(c.cloud.aws.subnetIdsByZone), ["eu-central-1a", "eu-central-1b", "eu-central-1c"]);
        assert.equal(c.cloud.aws.rootVolume.iops, 4000);
        assert.deepEqual(c.cloud.bootstrap.install, { source: "packages" });
        assert.equal(c.cloud.bootstrap.controlPlaneEndpoint, "api.prod.example.com:6443");
        assert.ok(!JSON.stringify(c).includes("secure"), "the secret's ciphertext stays in the file");
      },
    );

    it("stacks/Pulumi.azure.yaml: typed Azure settings, zones 1-3", () => {
      const c = load(example("azure"));
      assert.ok(c.cloud?.provider === "azure");
      assert.equal(c.sshUser, "molt");
      assert.deepEqual(c.cloud.failureDomains, ["1", "2", "3"]);
      assert.deepEqual(c.cloud.azure.zones, ["1", "2", "3"]);
      assert.equal(c.cloud.azure.osDisk.sizeGiB, 128);
    });

    it(
      "stacks/Pulumi.vsphere.yaml: typed vSphere settings, racks as failure domains, a should-rule for " +
        "anti-affinity",
      () => {
        const c = load(example("vsphere"));
        assert.ok(c.cloud?.provider === "vsphere");
        assert.deepEqual(c.cloud.failureDomains, ["rack-a", "rack-b", "rack-c"]);
        assert.equal(c.cloud.vsphere.failureDomains["rack-a"].host, "esx-a1.example.com");
        assert.deepEqual(c.cloud.antiAffinity, { mandatory: false });
        assert.deepEqual(c.cloud.bootstrap.install, { source: "image" });
      },
    );

    it("stacks/Pulumi.lab.yaml: no cloud settings (the lab's StackConfig is unchanged)", () => {
      const c = loadStackConfig(repo, "lab");
      assert.equal(c.cloud, undefined);
      assert.deepEqual(Object.keys(c).sort(), [
        "backups",
        "file",
        "intent",
        "lab",
        "lockSeconds",
        "notify",
        "promotion",
        "sshAccess",
        "sshUser",
      ]);
      assert.deepEqual(c.sshAccess, { agent: false });
    });
  });

  describe("defaults", () => {
    it("spreads over every configured zone when molt:failureDomains is absent", () => {
      assert.deepEqual(load(edited("aws", "molt:failureDomains", undefined)).cloud?.failureDomains, [
        "eu-central-1a",
        "eu-central-1b",
        "eu-central-1c",
      ]);
      assert.deepEqual(load(edited("vsphere", "molt:failureDomains", undefined)).cloud?.failureDomains, [
        "rack-a",
        "rack-b",
        "rack-c",
      ]);
    });

    it("takes a region without zones on Azure, and a should-rule on vSphere", () => {
      const azure = load({ ...edited("azure", "molt:azure.zones", []), "molt:failureDomains": [] });
      assert.ok(azure.cloud?.provider === "azure");
      assert.deepEqual([azure.cloud.failureDomains, azure.cloud.azure.zones], [[], []]);
      const vsphere = load(edited("vsphere", "molt:vsphereAntiAffinity", undefined));
      assert.ok(vsphere.cloud?.provider === "vsphere");
      assert.deepEqual(vsphere.cloud.antiAffinity, { mandatory: false });
    });

    it("carries an SSH port", () => {
      assert.deepEqual(load(edited("aws", "molt:ssh.port", 2222)).cloud?.ssh, { user: "ubuntu", port: 2222 });
    });
  });

  describe("the SSH client key and user", () => {
    it("refuses a private key in plain text, and says how to set it as a secret", () => {
      assertProblem(
        problemsOf(edited("aws", "molt:ssh.privateKey", "-----BEGIN OPENSSH PRIVATE KEY-----")),
        "molt:ssh.privateKey",
        /a Pulumi secret.*config set .*--secret --path 'molt:ssh.privateKey'/,
      );
    });

    it("requires the key on clouds", () => {
      assertProblem(
        problemsOf(edited("azure", "molt:ssh.privateKey", undefined)),
        "molt:ssh.privateKey",
        /required on clouds, as a Pulumi secret/,
      );
    });

    it("requires a user other than root, and points molt:sshUser to molt:ssh.user", () => {
      assertProblem(problemsOf(edited("aws", "molt:ssh.user", "root")), "molt:ssh.user", /not root/);
      assertProblem(problemsOf(edited("aws", "molt:ssh.user", undefined)), "molt:ssh.user", /required on clouds/);
      assertProblem(problemsOf({ ...example("vsphere"), "molt:sshUser": "molt" }), "molt:sshUser", /molt:ssh\.user/);
      assertProblem(problemsOf(edited("vsphere", "molt:ssh", undefined)), "molt:ssh", /required on clouds/);
    });

    it("refuses a client key or port on the lab, which makes its own", () => {
      const lab = { "molt:provider": "lab", "molt:replicas": 3, "molt:image": "lab-v1" };
      assertProblem(
        problemsOf({ ...lab, "molt:ssh": { privateKey: { secure: "v1:abc" } } }),
        "molt:ssh",
        /lab makes its own client key/,
      );
    });
  });

  describe("provider sections", () => {
    it("names the missing section of the stack's provider", () => {
      assertProblem(problemsOf(edited("aws", "molt:aws", undefined)), "molt:aws", /required for provider aws/);
      assertProblem(problemsOf(edited("azure", "molt:azure", undefined)), "molt:azure", /required for provider azure/);
      assertProblem(
        problemsOf(edited("vsphere", "molt:vsphere", undefined)),
        "molt:vsphere",
        /required for provider vsphere/,
      );
      assertProblem(problemsOf(edited("aws", "molt:bootstrap", undefined)), "molt:bootstrap", /required on clouds/);
    });

    it("names every bad AWS value by its key", () => {
      const c = edited("aws", "molt:aws.securityGroupIds", ["default"]);
      (c["molt:aws"] as Record<string, unknown>).loadBalancer = { targetGroupArn: "prod-api" };
      (c["molt:aws"] as Record<string, unknown>).rootVolume = { sizeGiB: 4 };
      (c["molt:aws"] as Record<string, unknown>).instnaceType = "m6i.large";
      const problems = problemsOf(c);
      assertProblem(problems, "molt:aws.securityGroupIds.0", /security group id/);
      assertProblem(problems, "molt:aws.loadBalancer.targetGroupArn", /not a target group ARN/);
      assertProblem(problems, "molt:aws.rootVolume.sizeGiB", /at least 8/);
      assertProblem(problems, "molt:aws", /instnaceType/);
    });

    it("needs a public address for SSH over the public address", () => {
      assertProblem(
        problemsOf(edited("aws", "molt:aws.sshAddress", "public")),
        "molt:aws.sshAddress",
        /associatePublicIpAddress: true/,
      );
    });

    it("names bad Azure and vSphere values by their keys", () => {
      assertProblem(
        problemsOf(edited("azure", "molt:azure.subnetId", "control-plane")),
        "molt:azure.subnetId",
        /Azure resource id/,
      );
      assertProblem(
        problemsOf(edited("vsphere", "molt:vsphere.failureDomains.rack-b.datastore", undefined)),
        "molt:vsphere.failureDomains.rack-b.datastore",
        /datastore/,
      );
      assertProblem(
        problemsOf(edited("vsphere", "molt:vsphereAntiAffinity.mandatory", "yes")),
        "molt:vsphereAntiAffinity.mandatory",
        /boolean/,
      );
    });

    it("refuses a section of another provider", () => {
      assertProblem(
        problemsOf({ ...example("aws"), "molt:azure": example("azure")["molt:azure"] }),
        "molt:azure",
        /not a setting of provider aws/,
      );
    });

    it("leaves cloud sections of lab stacks alone, as before", () => {
      const c = load(
        {
          "molt:provider": "lab",
          "molt:replicas": 3,
          "molt:image": "lab-v1",
          "molt:aws": { instanceType: "m6i.large" },
        },
        "lab",
      );
      assert.equal(c.cloud, undefined);
    });
  });

  describe("the API load balancer and the cloud controller manager (issues #29, #31)", () => {
    const TG = "arn:aws:elasticloadbalancing:eu-central-1:123456789012:targetgroup/prod-api/0123456789abcdef";

    it("takes a classic ELB by name, or a target group by ARN, as molt:aws.loadBalancer", () => {
      const elb = load(edited("aws", "molt:aws.loadBalancer", { classicElb: "kubeone-api-lb" }));
      assert.ok(elb.cloud?.provider === "aws");
      assert.deepEqual(elb.cloud.aws.loadBalancer, { classicElb: "kubeone-api-lb" });
      const tg = load(edited("aws", "molt:aws.loadBalancer", { targetGroupArn: TG }));
      assert.ok(tg.cloud?.provider === "aws");
      assert.deepEqual(tg.cloud.aws.loadBalancer, { targetGroupArn: TG });
      assert.ok(!("apiTargetGroupArn" in tg.cloud.aws), "the old spelling does not linger in the settings");
    });

    const bad: [string, unknown, string, RegExp][] = [
      [
        "both given",
        { classicElb: "kubeone-api-lb", targetGroupArn: TG },
        "",
        /one of classicElb or targetGroupArn, not both/,
      ],
      ["neither given", {}, "", /the API load balancer new nodes are registered in: \{ classicElb: NAME \}/],
      ["missing", undefined, "", /the API load balancer new nodes are registered in/],
      ["not an object", "kubeone-api-lb", "", /the API load balancer new nodes are registered in/],
      ["an unknown key", { classicElb: "kubeone-api-lb", nlb: "x" }, "", /nlb/],
      [
        "the ELB's DNS name for its name",
        { classicElb: "kubeone-api-lb-1529814937.eu-central-1.elb.amazonaws.com" },
        ".classicElb",
        /is a DNS name; give the load balancer's name/,
      ],
      [
        "an ARN for a classic ELB",
        { classicElb: "arn:aws:elasticloadbalancing:eu-central-1:123456789012:loadbalancer/kubeone-api-lb" },
        ".classicElb",
        /not given by ARN/,
      ],
      ["a name with a hyphen at its end", { classicElb: "kubeone-" }, ".classicElb", /not a classic ELB name/],
      ["a name longer than 32", { classicElb: "k".repeat(33) }, ".classicElb", /not a classic ELB name/],
      ["AWS's internal- prefix", { classicElb: "internal-api" }, ".classicElb", /not a classic ELB name/],
      ["an empty name", { classicElb: "" }, ".classicElb", /not a classic ELB name/],
      [
        "the NLB's ARN for its target group's",
        {
          targetGroupArn:
            "arn:aws:elasticloadbalancing:eu-central-1:123456789012:loadbalancer/net/api/0123456789abcdef",
        },
        ".targetGroupArn",
        /that is the load balancer's ARN/,
      ],
      [
        "a target group ARN without its id",
        { targetGroupArn: "arn:aws:elasticloadbalancing:eu-central-1:123456789012:targetgroup/prod-api" },
        ".targetGroupArn",
        /not a target group ARN \(arn:aws:elasticloadbalancing:REGION:ACCOUNT:targetgroup\/NAME\/ID\)/,
      ],
      ["a name for an ARN", { targetGroupArn: "prod-api" }, ".targetGroupArn", /not a target group ARN/],
    ];
    for (const [what, value, key, message] of bad)
      it(`bad input: molt:aws.loadBalancer ${what}`, () =>
        assertProblem(
          problemsOf(edited("aws", "molt:aws.loadBalancer", value)),
          `molt:aws.loadBalancer${key}`,
          message,
        ));

    it("bad input: the old molt:aws.apiTargetGroupArn, named with its new spelling", () => {
      const c = edited("aws", "molt:aws.apiTargetGroupArn", TG);
      assertProblem(problemsOf(c), "molt:aws.apiTargetGroupArn", /now written loadBalancer: \{ targetGroupArn: ARN \}/);
    });

    it("takes the cluster tag's value, owned or shared, and nothing else", () => {
      const c = load(edited("aws", "molt:aws.clusterTag", "shared"));
      assert.ok(c.cloud?.provider === "aws");
      assert.equal(c.cloud.aws.clusterTag, "shared");
      assertProblem(
        problemsOf(edited("aws", "molt:aws.clusterTag", "yes")),
        "molt:aws.clusterTag",
        /owned .* or shared/,
      );
    });

    it("runs the kubelets with --cloud-provider=external when asked, and refuses an in-tree provider", () => {
      const c = load(edited("aws", "molt:bootstrap.cloudProvider", "external"));
      assert.equal(c.cloud?.bootstrap.cloudProvider, "external");
      assert.equal(load(example("aws")).cloud?.bootstrap.cloudProvider, undefined);
      assertProblem(
        problemsOf(edited("aws", "molt:bootstrap.cloudProvider", "aws")),
        "molt:bootstrap.cloudProvider",
        /external .*in-tree cloud providers are gone since Kubernetes 1\.31/,
      );
    });

    it("gives kube-apiserver a shutdown delay that covers the load balancer's health check", () => {
      assert.equal(load(example("aws")).intent.apiServerShutdownDelaySeconds, 60);
      const c = load(edited("aws", "molt:bootstrap.apiServerShutdownDelaySeconds", 95));
      assert.equal(c.cloud?.bootstrap.apiServerShutdownDelaySeconds, 95);
      assert.equal(c.intent.apiServerShutdownDelaySeconds, 95);
      for (const bad of [-1, 2.5, 601])
        assertProblem(
          problemsOf(edited("aws", "molt:bootstrap.apiServerShutdownDelaySeconds", bad)),
          "molt:bootstrap.apiServerShutdownDelaySeconds",
          /not a whole number of seconds from 0 to 600/,
        );
      assertProblem(
        problemsOf(edited("aws", "molt:bootstrap.apiServerShutdownDelaySeconds", "60s")),
        "molt:bootstrap.apiServerShutdownDelaySeconds",
        /number/,
      );
    });

    it("bad input: an Azure backend pool id that names something else", () => {
      assertProblem(
        problemsOf(
          edited(
            "azure",
            "molt:azure.apiBackendPoolId",
            "/subscriptions/s1/resourceGroups/kubeone-rg/providers/Microsoft.Network/loadBalancers/kubernetes",
          ),
        ),
        "molt:azure.apiBackendPoolId",
        /a backend pool's resource id .*backendAddressPools\/ApiServers/,
      );
    });
  });

  describe("what the schema cannot see", () => {
    it("refuses failure domains that have no placement", () => {
      assertProblem(
        problemsOf(edited("aws", "molt:failureDomains", ["eu-central-1a", "eu-central-1d"])),
        "molt:failureDomains",
        /"eu-central-1d" is not in molt:aws\.subnetIdsByZone/,
      );
      assertProblem(
        problemsOf(edited("azure", "molt:failureDomains", ["4"])),
        "molt:failureDomains",
        /"4" is not in molt:azure\.zones/,
      );
      assertProblem(
        problemsOf(edited("vsphere", "molt:failureDomains", ["rack-a", "rack-a"])),
        "molt:failureDomains",
        /distinct/,
      );
    });

    it("refuses no failure domains where a node would need one", () => {
      assertProblem(
        problemsOf(edited("aws", "molt:failureDomains", [])),
        "molt:failureDomains",
        /empty, but molt:aws\.subnetIdsByZone has/,
      );
      assertProblem(
        problemsOf(edited("azure", "molt:failureDomains", [])),
        "molt:failureDomains",
        /empty, but molt:azure\.zones has/,
      );
    });

    it("requires a Kubernetes version kubeadm can join as etcd learners", () => {
      assertProblem(
        problemsOf(edited("aws", "molt:kubernetesVersion", undefined)),
        "molt:kubernetesVersion",
        /required on clouds/,
      );
      assertProblem(
        problemsOf(edited("aws", "molt:kubernetesVersion", "1.28.9")),
        "molt:kubernetesVersion",
        /older than 1\.29\.0/,
      );
    });

    it("checks the image against the provider: an AMI id, a pinned Azure image", () => {
      assertProblem(problemsOf(edited("aws", "molt:image", "ubuntu-24.04")), "molt:image", /an AMI id/);
      assertProblem(
        problemsOf(edited("azure", "molt:image", "Canonical:ubuntu-24_04-lts:server:latest")),
        "molt:image",
        /pin an exact version/,
      );
    });

    it("checks the kubeadm settings by their keys", () => {
      const problems = problemsOf(edited("aws", "molt:bootstrap.controlPlaneEndpoint", "api.prod.example.com"));
      assertProblem(problems, "molt:bootstrap.controlPlaneEndpoint", /not host:port/);
      assertProblem(
        problemsOf(edited("aws", "molt:bootstrap.install", { source: "apt" })),
        "molt:bootstrap.install.source",
        /image .*or packages/,
      );
    });

    it("reports every cross-field problem together", () => {
      const c = edited("aws", "molt:failureDomains", ["eu-central-1d"]);
      c["molt:image"] = "ubuntu";
      c["molt:kubernetesVersion"] = "1.27.0";
      const problems = problemsOf(c);
      for (const key of ["molt:failureDomains", "molt:image", "molt:kubernetesVersion"])
        assert.ok(
          problems.some((p) => p.startsWith(`${key}: `)),
          key,
        );
    });
  });

  describe("added with the provider registry (issue #16)", () => {
    it("refuses a cloud stack without a network add-on, saying why and what to write", () => {
      assertProblem(
        problemsOf(edited("aws", "molt:bootstrap.cniManifest", undefined)),
        "molt:bootstrap.cniManifest",
        /required on clouds: .*kube-flannel\.yml.*nodes stay NotReady.*"none"/,
      );
      assertProblem(problemsOf(edited("vsphere", "molt:bootstrap.cniManifest", "")), "molt:bootstrap.cniManifest", /./);
      assert.equal(load(edited("azure", "molt:bootstrap.cniManifest", "none")).cloud?.bootstrap.cniManifest, "none");
    });

    it("refuses a private address as the Azure endpoint (no hairpin, no mapping); a public frontend's is taken", () => {
      for (const bad of ["10.0.0.100:6443", "172.20.1.4:6443", "192.168.1.10:6443", "[fd00::10]:6443"])
        assertProblem(
          problemsOf(edited("azure", "molt:bootstrap.controlPlaneEndpoint", bad)),
          "molt:bootstrap.controlPlaneEndpoint",
          /is a private address: on Azure an internal load balancer's frontend does not hairpin.*Use a DNS name/,
        );
      // KubeOne's Azure example: the endpoint is the azurerm_lb's public IP.
      assert.equal(
        load(edited("azure", "molt:bootstrap.controlPlaneEndpoint", "20.79.14.201:6443")).cloud?.bootstrap
          .controlPlaneEndpoint,
        "20.79.14.201:6443",
      );
      assert.ok(load(edited("aws", "molt:bootstrap.controlPlaneEndpoint", "10.0.0.100:6443")).cloud);
    });

    it("takes an Azure availability set's fault domains, 1 to 3", () => {
      const c = load({ ...edited("azure", "molt:azure.zones", []), "molt:failureDomains": [] });
      assert.ok(c.cloud?.provider === "azure");
      assert.equal(c.cloud.azure.faultDomainCount, undefined);
      const three = edited("azure", "molt:azure.zones", []);
      (three["molt:azure"] as Record<string, unknown>).faultDomainCount = 3;
      three["molt:failureDomains"] = [];
      const loaded = load(three).cloud;
      assert.ok(loaded?.provider === "azure");
      assert.equal(loaded.azure.faultDomainCount, 3);
      assertProblem(
        problemsOf(edited("azure", "molt:azure.faultDomainCount", 4)),
        "molt:azure.faultDomainCount",
        /1 to 3/,
      );
    });

    it("turns the vSphere anti-affinity rule off, and keeps a pinned VM on its host only with a host", () => {
      const off = load(edited("vsphere", "molt:vsphereAntiAffinity", { enabled: false }));
      assert.ok(off.cloud?.provider === "vsphere");
      assert.deepEqual(off.cloud.antiAffinity, { mandatory: false, enabled: false });
      assertProblem(
        problemsOf(edited("vsphere", "molt:vsphere.failureDomains.rack-c.keepOnHost", true)),
        "molt:vsphere.failureDomains.rack-c.keepOnHost",
        /needs host/,
      );
      const kept = load(edited("vsphere", "molt:vsphere.failureDomains.rack-a.keepOnHost", true));
      assert.ok(kept.cloud?.provider === "vsphere");
      assert.equal(kept.cloud.vsphere.failureDomains["rack-a"].keepOnHost, true);
    });

    it("checks the sections of every provider present when molt:provider is unknown", () => {
      const problems = problemsOf({ ...example("aws"), "molt:provider": "gcp", "molt:aws": { instanceType: "" } });
      assertProblem(problems, "molt:provider", /one of lab, aws, azure, vsphere/);
      assertProblem(problems, "molt:aws.instanceType", /instance type/);
    });
  });
});
