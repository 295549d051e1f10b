// Stack configuration (stacks/Pulumi.<stack>.yaml): defaults, and every bad value reported
// with its key before anything runs.
import * as assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  InvalidConfigError,
  loadStackConfig,
  resolveLabImage,
  stackConfigPath,
  type StackConfig,
} from "../../orchestrator/config";

describe("stack configuration (orchestrator/config/index.ts)", () => {
  let dir: string;
  let savedLabRoot: string | undefined;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "molt-config-"));
    mkdirSync(join(dir, "stacks"));
    savedLabRoot = process.env.MOLT_LAB_ROOT;
    delete process.env.MOLT_LAB_ROOT;
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
    if (savedLabRoot === undefined) delete process.env.MOLT_LAB_ROOT;
    else process.env.MOLT_LAB_ROOT = savedLabRoot;
  });

  const write = (stack: string, text: string): string => {
    const file = stackConfigPath(dir, stack);
    writeFileSync(file, text);
    return file;
  };
  const load = (text: string, stack = "lab"): StackConfig => {
    write(stack, text);
    return loadStackConfig(dir, stack);
  };
  /** Loads and expects an InvalidConfigError; returns its problems. */
  const problemsOf = (text: string | undefined, stack = "lab"): string[] => {
    if (text !== undefined) write(stack, text);
    let err: unknown;
    try {
      loadStackConfig(dir, stack);
    } catch (e) {
      err = e;
    }
    assert.ok(
      err instanceof InvalidConfigError,
      `expected InvalidConfigError, got ${err === undefined ? "a valid config" : String(err)}`,
    );
    assert.ok(err.problems.length > 0);
    assert.match(err.message, /nothing was changed/);
    for (const p of err.problems) assert.ok(err.message.includes(p), "the message lists every problem");
    return err.problems;
  };
  const stackYaml = (lines: string[]): string => ["config:", ...lines.map((l) => `  ${l}`)].join("\n") + "\n";
  const labLines = ["molt:provider: lab", "molt:replicas: 3", "molt:image: lab-v1"];
  const awsLines = [
    "aws:region: eu-central-1",
    "molt:provider: aws",
    "molt:replicas: 3",
    "molt:image: ami-0123456789abcdef0",
    "molt:kubernetesVersion: 1.34.2",
  ];

  describe("valid stacks", () => {
    it("parses a minimal lab stack with defaults", () => {
      const file = write("lab", stackYaml(labLines));
      assert.deepEqual(loadStackConfig(dir, "lab"), {
        file,
        sshUser: "root",
        lockSeconds: 30,
        sshAccess: { agent: false },
        intent: {
          provider: "lab",
          replicas: 3,
          image: "lab-v1",
          rollout: { maxSurge: 1, onFailure: "rollback", maxAppliedLag: 1000 },
          timeouts: { joinSeconds: 300, settleSeconds: 60, drainSeconds: 300 },
        },
        lab: { lab: "lab", labRoot: "/var/lib/molt-lab", bridge: "moltbr0", subnet: "10.77.0.0/24", lbPort: 6443 },
        backups: { keep: 3 },
        promotion: { soakMinutes: 30, requireVerifiedOn: [] },
        notify: { includeHookOutput: false },
      });
    });

    it("reads molt:lock.in (unset: undefined, decided by the backend at run time)", () => {
      write("lab", stackYaml([...labLines, "molt:lock: { in: cluster }"]));
      assert.equal(loadStackConfig(dir, "lab").lockIn, "cluster");
      write("lab", stackYaml([...labLines, "molt:lock: {}"]));
      assert.equal(loadStackConfig(dir, "lab").lockIn, undefined);
    });

    it("reads molt:release and molt:promotion (sources as names or with a backend)", () => {
      const c = load(
        stackYaml([
          ...labLines,
          "molt:release: { name: os-2026-11, etcdVersion: v3.4.23, images: { prod: lab-v1, lab: lab-v1 } }",
          "molt:promotion: { soakMinutes: 0.5, requireVerifiedOn: [staging, { stack: dev, backend: 's3://b/x' }, { stack: qa, backend: 'azblob://c/x' }] }",
        ]),
      );
      assert.deepEqual(c.release, {
        name: "os-2026-11",
        etcdVersion: "3.4.23",
        images: { lab: "lab-v1", prod: "lab-v1" },
      });
      assert.deepEqual(c.promotion, {
        soakMinutes: 0.5,
        requireVerifiedOn: [
          { stack: "staging" },
          { stack: "dev", backend: "s3://b/x" },
          { stack: "qa", backend: "azblob://c/x" },
        ],
      });
    });

    it("takes every setting from the file", () => {
      const c = load(
        stackYaml([
          ...labLines,
          "molt:rollout: { maxSurge: 0, maxUnavailable: 0, onFailure: pause, maxAppliedLag: 50 }",
          "molt:timeouts: { joinSeconds: 120, settleSeconds: 30 }",
          "molt:ssh: { user: molt }",
          "molt:lab: { name: lab-a, root: /srv/lab, bridge: br-lab, subnet: 10.88.1.0/24, lbPort: 7443 }",
          "molt:backups: { keep: 7 }",
        ]),
      );
      assert.deepEqual(c.backups, { keep: 7 });
      assert.deepEqual(c.intent.rollout, { maxSurge: 0, onFailure: "pause", maxAppliedLag: 50 });
      assert.deepEqual(c.intent.timeouts, { joinSeconds: 120, settleSeconds: 30, drainSeconds: 300 });
      assert.equal(c.sshUser, "molt");
      assert.deepEqual(c.lab, {
        lab: "lab-a",
        labRoot: "/srv/lab",
        bridge: "br-lab",
        subnet: "10.88.1.0/24",
        lbPort: 7443,
      });
    });

    it("takes molt:lab.lbHealthCheck for molt's HAProxy", () => {
      const hc = { intervalSeconds: 10, unhealthyThreshold: 3, healthyThreshold: 2, deregistrationDelaySeconds: 15 };
      const c = load(stackYaml([...labLines, `molt:lab: { lbHealthCheck: ${JSON.stringify(hc)} }`]));
      assert.deepEqual(c.lab?.lbHealthCheck, hc);
    });

    it("takes a bastion and the ssh-agent from molt:ssh (KubeOne's bastion and ssh_agent_socket)", () => {
      const key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKvlAgnV3ktYkGkXT8XQ2NjFXYpB/0A2XJ4aC8V4p1Ai bastion";
      const c = load(
        stackYaml([
          ...labLines,
          `molt:ssh: { user: molt, agent: true, bastion: { host: 10.77.117.10, hostKey: "${key}" } }`,
          "molt:lab: { bridge: br-private, subnet: 10.77.118.0/24, isolated: true,",
          "  loadBalancer: { lab: foreign, address: 10.77.118.2:6443, netns: molt-foreign-bastion, bind: 0.0.0.0 } }",
        ]),
      );
      assert.deepEqual(c.sshAccess, {
        agent: true,
        bastion: { host: "10.77.117.10", port: 22, user: "molt", hostKey: key, agent: false },
      });
      assert.equal(c.lab?.isolated, true);
      assert.deepEqual(c.lab?.loadBalancer, {
        lab: "foreign",
        address: "10.77.118.2:6443",
        netns: "molt-foreign-bastion",
        bind: "0.0.0.0",
      });
      const c2 = load(
        stackYaml([
          ...labLines,
          `molt:ssh: { bastion: { host: jump.example.com, port: 2222, user: ops, agent: true, hostKey: "${key}" } }`,
        ]),
      );
      assert.deepEqual(c2.sshAccess, {
        agent: false,
        bastion: { host: "jump.example.com", port: 2222, user: "ops", hostKey: key, agent: true },
      });
    });

    it("takes the lab root from MOLT_LAB_ROOT when the file has none", () => {
      process.env.MOLT_LAB_ROOT = "/tmp/some-lab-root";
      assert.equal(load(stackYaml(labLines)).lab?.labRoot, "/tmp/some-lab-root");
    });

    it("derives the lab name from the stack name", () => {
      assert.equal(load(stackYaml(labLines), "Dev_Lab").lab?.lab, "dev-lab");
    });

    it("accepts replicas as Pulumi rewrites them (a string of digits)", () => {
      assert.equal(
        load(stackYaml(["molt:provider: lab", 'molt:replicas: "5"', "molt:image: lab-v1"])).intent.replicas,
        5,
      );
    });

    it("parses a cloud stack: Kubernetes version without the v, no lab settings, typed cloud settings", () => {
      const root = [process.cwd(), join(__dirname, "..", "..", "..")].find((r) =>
        existsSync(join(r, "stacks", "Pulumi.aws.yaml")),
      );
      assert.ok(root, "stacks/Pulumi.aws.yaml not found");
      const text = readFileSync(join(root, "stacks", "Pulumi.aws.yaml"), "utf8").replace(
        /^(\s*molt:kubernetesVersion:\s*)\S+/m,
        "$1v1.34.2",
      );
      const c = load(text, "prod");
      assert.equal(c.intent.provider, "aws");
      assert.equal(c.intent.kubernetesVersion, "1.34.2");
      assert.equal(c.lab, undefined);
      assert.equal(c.cloud?.provider, "aws");
    });

    it("accepts the repository's example stacks", () => {
      // Compiled tests run from dist/test/unit (or another outDir): find the repository root.
      const root = [process.cwd(), join(__dirname, "..", "..", "..")].find((r) =>
        existsSync(join(r, "stacks", "Pulumi.lab.yaml")),
      );
      assert.ok(root, "stacks/Pulumi.lab.yaml not found");
      for (const provider of ["lab", "aws", "azure", "vsphere"] as const) {
        const c = load(readFileSync(join(root, "stacks", `Pulumi.${provider}.yaml`), "utf8"), provider);
        assert.equal(c.intent.provider, provider);
        assert.equal(c.intent.replicas, 3);
        assert.equal(c.lab !== undefined, provider === "lab");
        assert.equal(c.intent.kubernetesVersion, provider === "lab" ? undefined : "1.34.2");
      }
    });

    it("allows maxSurge 0 with 3 replicas", () => {
      assert.equal(load(stackYaml([...labLines, "molt:rollout: { maxSurge: 0 }"])).intent.rollout.maxSurge, 0);
    });
    it("takes molt:rollout.pruneWithNextSurge (off unless true)", () => {
      const on = load(stackYaml([...labLines, "molt:rollout: { pruneWithNextSurge: true }"])).intent.rollout;
      assert.equal(on.pruneWithNextSurge, true);
      const off = load(stackYaml([...labLines, "molt:rollout: { pruneWithNextSurge: false }"])).intent.rollout;
      assert.equal(off.pruneWithNextSurge, undefined);
      assert.equal(load(stackYaml(labLines)).intent.rollout.pruneWithNextSurge, undefined);
    });
  });

  describe("invalid values name their key", () => {
    const table: Array<[string, string[], string, RegExp]> = [
      ["even replicas", ["molt:provider: lab", "molt:replicas: 2", "molt:image: lab-v1"], "molt:replicas", /odd/],
      ["0 replicas", ["molt:provider: lab", "molt:replicas: 0", "molt:image: lab-v1"], "molt:replicas", /at least 1/],
      ["11 replicas", ["molt:provider: lab", "molt:replicas: 11", "molt:image: lab-v1"], "molt:replicas", /at most 9/],
      [
        "fractional replicas",
        ["molt:provider: lab", "molt:replicas: 2.5", "molt:image: lab-v1"],
        "molt:replicas",
        /whole number/,
      ],
      [
        "replicas as words",
        ["molt:provider: lab", "molt:replicas: three", "molt:image: lab-v1"],
        "molt:replicas",
        /number/,
      ],
      [
        "maxSurge 0 with 1 replica",
        ["molt:provider: lab", "molt:replicas: 1", "molt:image: lab-v1", "molt:rollout: { maxSurge: 0 }"],
        "molt:rollout.maxSurge",
        /at least 3 replicas/,
      ],
      ["maxSurge 2", [...labLines, "molt:rollout: { maxSurge: 2 }"], "molt:rollout.maxSurge", /0 or 1/],
      [
        "pruneWithNextSurge as a word",
        [...labLines, "molt:rollout: { pruneWithNextSurge: yes please }"],
        "molt:rollout.pruneWithNextSurge",
        /true or false: destroy a retired node and create the next in one engine run/,
      ],
      [
        "pruneWithNextSurge with maxSurge 0",
        [...labLines, "molt:rollout: { maxSurge: 0, pruneWithNextSurge: true }"],
        "molt:rollout.pruneWithNextSurge",
        /one machine beyond replicas, which maxSurge: 0 rules out/,
      ],
      [
        "maxUnavailable 1",
        [...labLines, "molt:rollout: { maxUnavailable: 1 }"],
        "molt:rollout.maxUnavailable",
        /never takes a member away/,
      ],
      [
        "unknown onFailure",
        [...labLines, "molt:rollout: { onFailure: ignore }"],
        "molt:rollout.onFailure",
        /rollback|pause/,
      ],
      [
        "negative maxAppliedLag",
        [...labLines, "molt:rollout: { maxAppliedLag: -1 }"],
        "molt:rollout.maxAppliedLag",
        /./,
      ],
      ["unknown key inside molt:rollout", [...labLines, "molt:rollout: { maxSurg: 1 }"], "molt:rollout", /maxSurg/],
      [
        "unknown provider",
        ["molt:provider: gcp", "molt:replicas: 3", "molt:image: lab-v1"],
        "molt:provider",
        /lab, aws, azure, vsphere/,
      ],
      ["missing provider", ["molt:replicas: 3", "molt:image: lab-v1"], "molt:provider", /./],
      ["missing image", ["molt:provider: lab", "molt:replicas: 3"], "molt:image", /./],
      ["empty image", ["molt:provider: lab", "molt:replicas: 3", 'molt:image: ""'], "molt:image", /base image/],
      [
        "invalid kubernetesVersion",
        [...awsLines.slice(0, 4), 'molt:kubernetesVersion: "1.34"'],
        "molt:kubernetesVersion",
        /full version/,
      ],
      // semver alone lets these through; each would have been a second spelling of a version.
      [
        "kubernetesVersion with a second v",
        [...awsLines.slice(0, 4), "molt:kubernetesVersion: vv1.34.2"],
        "molt:kubernetesVersion",
        /second "v" \(got "vv1\.34\.2"\)/,
      ],
      [
        "kubernetesVersion with spaces",
        [...awsLines.slice(0, 4), 'molt:kubernetesVersion: " 1.34.2"'],
        "molt:kubernetesVersion",
        /no spaces/,
      ],
      [
        "kubernetesVersion with build metadata",
        [...awsLines.slice(0, 4), "molt:kubernetesVersion: 1.34.2+k3s1"],
        "molt:kubernetesVersion",
        /build metadata/,
      ],
      [
        "kubernetesVersion not a string",
        [...awsLines.slice(0, 4), "molt:kubernetesVersion: 1.34"],
        "molt:kubernetesVersion",
        /full version/,
      ],
      ["drainSeconds 0", [...labLines, "molt:timeouts: { drainSeconds: 0 }"], "molt:timeouts.drainSeconds", /./],
      ["joinSeconds below 10", [...labLines, "molt:timeouts: { joinSeconds: 5 }"], "molt:timeouts.joinSeconds", /./],
      ["lockSeconds below 10", [...labLines, "molt:timeouts: { lockSeconds: 5 }"], "molt:timeouts.lockSeconds", />=10/],
      [
        "lockSeconds above 600",
        [...labLines, "molt:timeouts: { lockSeconds: 900 }"],
        "molt:timeouts.lockSeconds",
        /<=600/,
      ],
      [
        "fractional lockSeconds",
        [...labLines, "molt:timeouts: { lockSeconds: 12.5 }"],
        "molt:timeouts.lockSeconds",
        /expected int/,
      ],
      [
        "lockSeconds as words",
        [...labLines, "molt:timeouts: { lockSeconds: soon }"],
        "molt:timeouts.lockSeconds",
        /number/,
      ],
      ["unknown key inside molt:timeouts", [...labLines, "molt:timeouts: { join: 60 }"], "molt:timeouts", /join/],
      [
        "lock.in neither backend nor cluster",
        [...labLines, "molt:lock: { in: etcd }"],
        "molt:lock.in",
        /"backend".*"cluster"/,
      ],
      ["lock.in a number", [...labLines, "molt:lock: { in: 1 }"], "molt:lock.in", /"backend".*"cluster"/],
      ["unknown key inside molt:lock", [...labLines, "molt:lock: { where: cluster }"], "molt:lock", /where/],
      ["lock not a map", [...labLines, "molt:lock: cluster"], "molt:lock", /in: "backend" \| "cluster"/],
      ["backups.keep 0", [...labLines, "molt:backups: { keep: 0 }"], "molt:backups.keep", /at least 1/],
      ["backups.keep not whole", [...labLines, "molt:backups: { keep: 2.5 }"], "molt:backups.keep", /whole/],
      ["backups.keep a word", [...labLines, "molt:backups: { keep: all }"], "molt:backups.keep", /number/],
      ["backups.keep too many", [...labLines, "molt:backups: { keep: 5000 }"], "molt:backups.keep", /1000/],
      ["unknown key inside molt:backups", [...labLines, "molt:backups: { kept: 2 }"], "molt:backups", /kept/],
      ["backups not a map", [...labLines, "molt:backups: 3"], "molt:backups", /./],
      ["bad ssh user", [...labLines, 'molt:ssh: { user: "Root!" }'], "molt:ssh.user", /Unix user name/],
      ["bad lab subnet", [...labLines, "molt:lab: { subnet: 10.77.0.0/16 }"], "molt:lab.subnet", /\/24/],
      [
        "bad bridge name (too long)",
        [...labLines, "molt:lab: { bridge: molt-bridge-0123 }"],
        "molt:lab.bridge",
        /15 characters/,
      ],
      ["bad lab name", [...labLines, "molt:lab: { name: Lab_A }"], "molt:lab.name", /DNS label/],
      ["relative lab root", [...labLines, "molt:lab: { root: lab }"], "molt:lab.root", /absolute/],
      ["lab lbPort out of range", [...labLines, "molt:lab: { lbPort: 70000 }"], "molt:lab.lbPort", /./],
      ["unknown key inside molt:lab", [...labLines, "molt:lab: { subnett: 10.77.0.0/24 }"], "molt:lab", /subnett/],
      ["ssh agent not a boolean", [...labLines, "molt:ssh: { agent: yes please }"], "molt:ssh.agent", /boolean/],
      [
        "bastion without its host key",
        [...labLines, "molt:ssh: { bastion: { host: 10.0.0.1 } }"],
        "molt:ssh.bastion.hostKey",
        /ssh-ed25519/,
      ],
      [
        "bastion host key that is not a key",
        [...labLines, 'molt:ssh: { bastion: { host: 10.0.0.1, hostKey: "SHA256:abc" } }'],
        "molt:ssh.bastion.hostKey",
        /SSH public key line/,
      ],
      [
        "bastion host with a space",
        [...labLines, 'molt:ssh: { bastion: { host: "jump host", hostKey: "ssh-ed25519 AAAA" } }'],
        "molt:ssh.bastion.host",
        /host name or address/,
      ],
      [
        "bastion port out of range",
        [...labLines, 'molt:ssh: { bastion: { host: j, port: 0, hostKey: "ssh-ed25519 AAAA" } }'],
        "molt:ssh.bastion.port",
        /./,
      ],
      [
        "bastion with its own key in plain text",
        [...labLines, 'molt:ssh: { bastion: { host: j, privateKey: "-----BEGIN", hostKey: "ssh-ed25519 AAAA" } }'],
        "molt:ssh.bastion",
        /privateKey/,
      ],
      [
        "bastion that is a string",
        [...labLines, "molt:ssh: { bastion: ops@jump }"],
        "molt:ssh.bastion",
        /host, hostKey/,
      ],
      [
        "isolated lab without a bastion",
        [...labLines, "molt:lab: { isolated: true }"],
        "molt:lab.isolated",
        /molt:ssh.bastion/,
      ],
      [
        "lab load balancer without an address",
        [...labLines, "molt:lab: { loadBalancer: { lab: t18, bind: 0.0.0.0 } }"],
        "molt:lab.loadBalancer.address",
        /./,
      ],
      [
        "lab health check interval of 0",
        [
          ...labLines,
          "molt:lab: { lbHealthCheck: { intervalSeconds: 0, unhealthyThreshold: 3, healthyThreshold: 2, " +
            "deregistrationDelaySeconds: 15 } }",
        ],
        "molt:lab.lbHealthCheck.intervalSeconds",
        /1/,
      ],
      [
        "lab health check without its deregistration delay",
        [
          ...labLines,
          "molt:lab: { lbHealthCheck: { intervalSeconds: 10, unhealthyThreshold: 3, healthyThreshold: 2 } }",
        ],
        "molt:lab.lbHealthCheck.deregistrationDelaySeconds",
        /./,
      ],
      [
        "lab health check with an unknown key",
        [
          ...labLines,
          "molt:lab: { lbHealthCheck: { interval: 10, intervalSeconds: 10, unhealthyThreshold: 3, " +
            "healthyThreshold: 2, deregistrationDelaySeconds: 15 } }",
        ],
        "molt:lab.lbHealthCheck",
        /interval/,
      ],
      [
        "lab health check for the cluster's own load balancer",
        [
          ...labLines,
          "molt:lab: { loadBalancer: { lab: t18, address: 10.77.118.2:6443 }, lbHealthCheck: { intervalSeconds: 10, " +
            "unhealthyThreshold: 3, healthyThreshold: 2, deregistrationDelaySeconds: 15 } }",
        ],
        "molt:lab.lbHealthCheck",
        /molt:lab.loadBalancer the cluster's own serves/,
      ],
      [
        "lab health check with a VIP",
        [
          ...labLines,
          "molt:apiEndpoint: { mode: vip }",
          "molt:lab: { lbHealthCheck: { intervalSeconds: 10, unhealthyThreshold: 3, healthyThreshold: 2, " +
            "deregistrationDelaySeconds: 15 } }",
        ],
        "molt:lab.lbHealthCheck",
        /mode vip there is none/,
      ],
      [
        "lab load balancer address without a port",
        [...labLines, "molt:lab: { loadBalancer: { lab: t18, address: 10.77.118.2 } }"],
        "molt:lab.loadBalancer.address",
        /IPv4:port/,
      ],
      [
        "release without a name",
        [...labLines, "molt:release: { images: { lab: lab-v1 } }"],
        "molt:release.name",
        /release's name/,
      ],
      [
        "release name with a slash",
        [...labLines, "molt:release: { name: a/b, images: { lab: lab-v1 } }"],
        "molt:release.name",
        /letters, digits/,
      ],
      [
        "release as a bare string",
        [...labLines, "molt:release: k8s-1.37.2-os-2026-11"],
        "molt:release",
        /name, images/,
      ],
      [
        "release without this stack's image",
        [...labLines, "molt:release: { name: r1, images: { prod: lab-v1 } }"],
        "molt:release.images",
        /no image for this stack \(lab\)/,
      ],
      [
        "release with no images",
        [...labLines, "molt:release: { name: r1, images: {} }"],
        "molt:release.images",
        /at least/,
      ],
      [
        "release image not molt:image",
        [...labLines, "molt:release: { name: r1, images: { lab: lab-v2 } }"],
        "molt:image",
        /not release r1's image for stack lab \(lab-v2\)/,
      ],
      [
        "release Kubernetes version not molt:kubernetesVersion",
        [...awsLines, "molt:release: { name: r1, kubernetesVersion: 1.35.0, images: { lab: ami-0123456789abcdef0 } }"],
        "molt:kubernetesVersion",
        /not release r1's Kubernetes version \(1.35.0\)/,
      ],
      [
        "release etcd version not a version",
        [...labLines, "molt:release: { name: r1, etcdVersion: '3.6', images: { lab: lab-v1 } }"],
        "molt:release.etcdVersion",
        /full etcd version/,
      ],
      [
        "unknown key in molt:release",
        [...labLines, "molt:release: { name: r1, image: lab-v1, images: { lab: lab-v1 } }"],
        "molt:release",
        /image/,
      ],
      [
        "negative soakMinutes",
        [...labLines, "molt:promotion: { soakMinutes: -1 }"],
        "molt:promotion.soakMinutes",
        /0 or more/,
      ],
      [
        "soakMinutes as words",
        [...labLines, "molt:promotion: { soakMinutes: half-an-hour }"],
        "molt:promotion.soakMinutes",
        /minutes the cluster must stay healthy/,
      ],
      [
        "requireVerifiedOn naming this stack",
        [...labLines, "molt:promotion: { requireVerifiedOn: [lab] }"],
        "molt:promotion.requireVerifiedOn",
        /is this stack/,
      ],
      [
        "requireVerifiedOn as a string",
        [...labLines, "molt:promotion: { requireVerifiedOn: staging }"],
        "molt:promotion.requireVerifiedOn",
        /a list of stacks/,
      ],
      [
        "requireVerifiedOn empty",
        [...labLines, "molt:promotion: { requireVerifiedOn: [] }"],
        "molt:promotion.requireVerifiedOn",
        /at least one stack/,
      ],
      [
        "requireVerifiedOn twice the same stack",
        [...labLines, "molt:promotion: { requireVerifiedOn: [staging, { stack: staging }] }"],
        "molt:promotion.requireVerifiedOn",
        /named twice/,
      ],
      [
        "requireVerifiedOn with a Pulumi Cloud backend",
        [...labLines, "molt:promotion: { requireVerifiedOn: [{ stack: staging, backend: 'https://api.pulumi.com' }] }"],
        "molt:promotion.requireVerifiedOn.0.backend",
        /file:\/\/, s3:\/\/ or azblob:\/\/ backend URL/,
      ],
      ["unknown key in molt:promotion", [...labLines, "molt:promotion: { soak: 5 }"], "molt:promotion", /soak/],
    ];
    for (const [title, lines, key, why] of table) {
      it(`rejects ${title}`, () => {
        const problems = problemsOf(stackYaml(lines));
        const hit = problems.find((p) => p.startsWith(`${key}:`));
        assert.ok(hit, `no problem names ${key}: ${JSON.stringify(problems)}`);
        assert.match(hit, why);
      });
    }
  });

  describe("files that cannot be read as a stack", () => {
    it("reports a missing file, naming it", () => {
      const problems = problemsOf(undefined, "nope");
      assert.match(problems[0], /no such file/);
      assert.ok(problems[0].includes(stackConfigPath(dir, "nope")));
    });

    it("reports invalid YAML", () => {
      assert.match(problemsOf("config:\n  molt:provider: [lab\n")[0], /not valid YAML/);
    });

    it("reports a file without a config map", () => {
      assert.match(problemsOf("encryptionsalt: abc\n")[0], /no `config:` map/);
      assert.match(problemsOf("")[0], /no `config:` map/);
      assert.match(problemsOf("config: lab\n")[0], /no `config:` map/);
    });

    it("refuses a stack name that could leave stacks/", () => {
      writeFileSync(join(dir, "x.yaml"), stackYaml(labLines));
      for (const stack of ["../x", "a/b", "", "lab yaml"]) {
        let err: unknown;
        try {
          loadStackConfig(dir, stack);
        } catch (e) {
          err = e;
        }
        assert.ok(err instanceof InvalidConfigError, `stack ${JSON.stringify(stack)} accepted`);
        assert.equal(err.file, `--stack ${stack}`);
        assert.match(err.problems[0], /may only contain/);
      }
    });
  });

  describe("lab images decide the versions (resolveLabImage)", () => {
    const image = (root: string, name: string, meta: Record<string, unknown>) => {
      mkdirSync(join(root, "images", name), { recursive: true });
      writeFileSync(join(root, "images", name, "image.json"), JSON.stringify({ name, ...meta }));
    };
    const resolve = (lines: string[]): StackConfig => {
      const root = join(dir, "lab-root");
      image(root, "lab-v1", { etcdVersion: "3.4.23" });
      image(root, "k8s-v1.36.3", { kubernetesVersion: "v1.36.3", etcdVersion: "3.6.16" });
      return resolveLabImage(load(stackYaml([...lines, `molt:lab: { root: ${root} }`])));
    };
    const refusal = (lines: string[]): string => {
      try {
        resolve(lines);
      } catch (e) {
        assert.ok(e instanceof InvalidConfigError, String(e));
        assert.match(e.message, /nothing was changed/);
        return e.problems.join("\n");
      }
      assert.fail("accepted");
    };

    it("takes the Kubernetes and etcd versions from a k8s image", () => {
      const c = resolve(["molt:provider: lab", "molt:replicas: 3", "molt:image: k8s-v1.36.3"]);
      assert.equal(c.intent.kubernetesVersion, "1.36.3");
      assert.equal(c.intent.etcdVersion, "3.6.16");
      assert.equal(
        resolve([
          "molt:provider: lab",
          "molt:replicas: 3",
          "molt:image: k8s-v1.36.3",
          "molt:kubernetesVersion: v1.36.3",
        ]).intent.kubernetesVersion,
        "1.36.3",
      );
    });

    it('reads "v1.36.3" as 1.36.3 once, at the file: the whole config equals the one without the v', () => {
      const lines = ["molt:provider: lab", "molt:replicas: 3", "molt:image: k8s-v1.36.3"];
      const withV = resolve([...lines, "molt:kubernetesVersion: v1.36.3"]);
      const without = resolve([...lines, "molt:kubernetesVersion: 1.36.3"]);
      // What status, records and every comparison read comes from here: one spelling.
      assert.deepEqual(withV, without);
      assert.equal(withV.intent.kubernetesVersion, "1.36.3");
    });

    it("leaves etcd-only images without a Kubernetes version, with their etcd version", () => {
      const c = resolve(["molt:provider: lab", "molt:replicas: 3", "molt:image: lab-v1"]);
      assert.equal(c.intent.kubernetesVersion, undefined);
      assert.equal(c.intent.etcdVersion, "3.4.23");
    });

    it("refuses a missing image, naming the ones there are", () => {
      assert.match(
        refusal(["molt:provider: lab", "molt:replicas: 3", "molt:image: k8s-v1.99.0"]),
        /"k8s-v1\.99\.0" does not exist .*have: k8s-v1\.36\.3, lab-v1/,
      );
      assert.match(refusal(["molt:provider: lab", "molt:replicas: 3", "molt:image: ../../etc"]), /does not exist/);
    });

    it("refuses a molt:kubernetesVersion the image does not carry", () => {
      assert.match(
        refusal([
          "molt:provider: lab",
          "molt:replicas: 3",
          "molt:image: k8s-v1.36.3",
          "molt:kubernetesVersion: 1.37.2",
        ]),
        /1\.37\.2 does not match lab image "k8s-v1\.36\.3", which carries Kubernetes 1\.36\.3/,
      );
      assert.match(
        refusal(["molt:provider: lab", "molt:replicas: 3", "molt:image: lab-v1", "molt:kubernetesVersion: 1.36.3"]),
        /runs etcd only/,
      );
    });

    it("molt:encryptionAtRest: true on a Kubernetes image; refused on an etcd-only one, or when not a boolean", () => {
      const base = ["molt:provider: lab", "molt:replicas: 3"];
      const c = resolve([...base, "molt:image: k8s-v1.36.3", "molt:encryptionAtRest: true"]);
      assert.equal(c.intent.encryptionAtRest, true);
      assert.equal(resolve([...base, "molt:image: k8s-v1.36.3"]).intent.encryptionAtRest, undefined);
      assert.match(
        refusal([...base, "molt:image: lab-v1", "molt:encryptionAtRest: true"]),
        /molt:encryptionAtRest: lab image "lab-v1" runs etcd only: there is no API server to encrypt Secrets/,
      );
      assert.match(
        refusal([...base, "molt:image: k8s-v1.36.3", 'molt:encryptionAtRest: "yes"']),
        /molt:encryptionAtRest: true: a new cluster's Secrets are encrypted/,
      );
    });
  });

  describe("several problems at once", () => {
    it("reports every schema problem together", () => {
      const problems = problemsOf(
        stackYaml([
          "molt:provider: gcp",
          "molt:replicas: 2",
          "molt:rollout: { maxSurge: 2, maxUnavailable: 1 }",
          "molt:lab: { bridge: a-very-long-bridge-name }",
        ]),
      );
      for (const key of [
        "molt:provider",
        "molt:replicas",
        "molt:image",
        "molt:rollout.maxSurge",
        "molt:rollout.maxUnavailable",
        "molt:lab.bridge",
      ]) {
        assert.ok(
          problems.some((p) => p.startsWith(`${key}:`)),
          `${key} missing from ${JSON.stringify(problems)}`,
        );
      }
    });

    it("reports schema and cross-field problems in one go", () => {
      const problems = problemsOf(
        stackYaml(["molt:provider: lab", "molt:replicas: 1", "molt:image: ''", "molt:rollout: { maxSurge: 0 }"]),
      );
      assert.ok(
        problems.some((p) => p.startsWith("molt:image:")),
        JSON.stringify(problems),
      );
      assert.ok(
        problems.some((p) => p.startsWith("molt:rollout.maxSurge:")),
        JSON.stringify(problems),
      );
    });

    it("quotes the value that was given", () => {
      const problems = problemsOf(stackYaml(["molt:provider: lab", "molt:replicas: 4", "molt:image: lab-v1"]));
      assert.ok(
        problems.some((p) => p.startsWith("molt:replicas:") && p.includes("(got 4)")),
        JSON.stringify(problems),
      );
    });

    it("refuses a subnet with an impossible octet", () => {
      const problems = problemsOf(stackYaml([...labLines, "molt:lab: { subnet: 300.77.0.0/24 }"]));
      assert.ok(
        problems.some((p) => p.startsWith("molt:lab.subnet:")),
        JSON.stringify(problems),
      );
    });

    it("refuses a stack name that makes no valid lab name unless molt:lab.name is set", () => {
      assert.ok(problemsOf(stackYaml(labLines), "_lab.").some((p) => p.startsWith("molt:lab.name:")));
      assert.equal(load(stackYaml([...labLines, "molt:lab: { name: ok }"]), "_lab.").lab?.lab, "ok");
    });

    it("refuses a misspelt molt: section instead of ignoring it", () => {
      const problems = problemsOf(stackYaml([...labLines, "molt:rolout: { maxSurge: 0 }"]));
      assert.ok(
        problems.some((p) => p.startsWith("molt:rolout:") && p.includes("not a molt setting")),
        JSON.stringify(problems),
      );
    });

    it("reports every cross-field problem together", () => {
      const problems = problemsOf(
        stackYaml([
          "molt:provider: lab",
          "molt:replicas: 1",
          "molt:image: lab-v1",
          "molt:rollout: { maxSurge: 0 }",
          "molt:ssh: { port: 2222 }",
        ]),
      );
      assert.equal(problems.length, 2);
      assert.ok(problems.some((p) => p.startsWith("molt:rollout.maxSurge:")));
      assert.ok(problems.some((p) => p.startsWith("molt:ssh:")));
    });
  });
});
