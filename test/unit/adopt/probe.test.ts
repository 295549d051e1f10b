// What a host to adopt runs (orchestrator/adopt/probe.ts) and which hosts are kubeadm-made
// stacked etcd (stackedEtcdProblems): external etcd and the wrong kind are refused by name.
import * as assert from "node:assert/strict";
import { stackedEtcdProblems } from "../../../orchestrator/adopt";
import type { AdoptionHost } from "../../../orchestrator/adopt/input";
import { parseProbe, probeScript, type HostFacts } from "../../../orchestrator/adopt/probe";
import { bash, shellcheck } from "../kubeadm/shell";
import { kubeletCloudProviderProblems, machineIdentities } from "../../../orchestrator/adopt/cloud-checks";

const host: AdoptionHost = { address: "10.0.1.10", sshHost: "10.0.1.10", sshPort: 22 };
const stacked: HostFacts = {
  hostname: "cp-0",
  kubeadm: "1.36.3",
  etcdStaticPod: true,
  apiserverEtcdServers: "https://127.0.0.1:2379",
  etcdPki: true,
  etcdListening: true,
};
const cfg = (kubernetesVersion?: string) => ({
  file: "stacks/Pulumi.prod.yaml",
  intent: { image: kubernetesVersion ? "k8s-v1.36.3" : "etcd-v3.5.35", kubernetesVersion } as never,
});
const problems = (f: Partial<HostFacts>, kube = true) =>
  stackedEtcdProblems([host], new Map([[host, { ...stacked, ...f }]]), kube, cfg(kube ? "1.36.3" : undefined));

describe("adoption: kubeadm-made stacked etcd (orchestrator/adopt/probe.ts)", () => {
  it("the probe passes shellcheck, as root and through sudo", () => {
    assert.equal(shellcheck(probeScript("root")), "");
    assert.equal(shellcheck(probeScript("ubuntu")), "");
    assert.match(probeScript("ubuntu"), /sudo -n /);
  });

  it("reads the probe's output", () => {
    assert.deepEqual(
      parseProbe(
        [
          "hostname=cp-0",
          "kubeadm=v1.36.3",
          "etcd-static-pod=yes",
          "apiserver-etcd-servers=https://127.0.0.1:2379",
          "etcd-pki=yes",
          "etcd-listening=yes",
        ].join("\n"),
      ),
      stacked,
    );
    assert.deepEqual(parseProbe("hostname=e1\netcd-pki=yes\n"), {
      hostname: "e1",
      etcdStaticPod: false,
      etcdPki: true,
      etcdListening: false,
    });
  });

  it("accepts a kubeadm control-plane node with its local etcd static pod", () => {
    assert.deepEqual(problems({}), []);
    assert.deepEqual(problems({ apiserverEtcdServers: "https://localhost:2379" }), []);
  });

  const table: [string, Partial<HostFacts>, boolean, RegExp][] = [
    [
      "a kube-apiserver on external etcd",
      {
        apiserverEtcdServers: "https://10.0.9.1:2379,https://10.0.9.2:2379",
        etcdStaticPod: false,
        etcdListening: false,
      },
      true,
      /uses external etcd \(https:\/\/10\.0\.9\.1:2379,.*does not manage an external one/,
    ],
    ["no etcd static pod", { etcdStaticPod: false }, true, /no local etcd static pod/],
    [
      "no kubeadm on a Kubernetes stack",
      { kubeadm: undefined },
      true,
      /runs no kubeadm, but .* rolls to Kubernetes 1\.36\.3/,
    ],
    ["Kubernetes hosts on an etcd-only image", {}, false, /runs Kubernetes \(kubeadm 1\.36\.3\), but .*etcd-only/],
    ["no etcd CA at kubeadm's path", { etcdPki: false }, true, /no etcd CA at \/etc\/kubernetes\/pki\/etcd\/ca\.crt/],
    ["no member listening locally", { etcdListening: false }, true, /no etcd member listening on 127\.0\.0\.1:2379/],
  ];
  for (const [title, f, kube, why] of table) {
    it(`refuses ${title}, naming the host`, () => {
      const p = problems(f, kube);
      assert.ok(
        p.some((x) => why.test(x) && x.includes("10.0.1.10")),
        JSON.stringify(p),
      );
    });
  }
});

describe("adoption: the cloud's view of each host (probe.ts, cloud-checks.ts)", () => {
  // The probe's own text, run by bash with the host's files and metadata service faked as functions.
  const runProbe = (provider: string | undefined, kubeletFlags: string | undefined, imds: Record<string, string>) => {
    const present = kubeletFlags === undefined ? 1 : 0;
    const fakes = [
      `test() { if [ "$1" = -f ] && [ "$2" = /var/lib/kubelet/kubeadm-flags.env ]; then return ${present}; fi; ` +
        'builtin test "$@"; }',
      `cat() { printf '%s\\n' ${JSON.stringify(kubeletFlags ?? "")}; }`,
      "curl() {",
      '  case "$*" in',
      ...Object.entries(imds).map(([path, answer]) => `    *${path}*) printf '%s' ${JSON.stringify(answer)} ;;`),
      "    *) return 22 ;;",
      "  esac",
      "}",
      "hostname() { echo cp-0; }",
    ].join("\n");
    const r = bash(`${fakes}\n${probeScript("root", provider)}`);
    assert.equal(r.status, 0, r.stderr);
    assert.ok(!r.stdout.includes("Fake-token"), "the metadata service's session token stays on the host");
    return parseProbe(r.stdout);
  };
  const AWS_IMDS = {
    "api/token": "AQAEAFake-token==",
    "meta-data/instance-id": "i-0123456789abcdef0",
    "placement/availability-zone": "eu-central-1b",
  };
  const VM = "/subscriptions/s1/resourceGroups/kubeone-rg/providers/Microsoft.Compute/virtualMachines/kubeone-cp-0";

  it("the probe passes shellcheck with each cloud's identity lines", () => {
    for (const provider of ["aws", "azure", "vsphere", undefined])
      assert.equal(shellcheck(probeScript("ubuntu", provider)), "");
    assert.doesNotMatch(probeScript("ubuntu", "lab"), /169\.254\.169\.254/);
  });

  it("reads the kubelet's --cloud-provider from kubeadm's flags file, and says when there is none", () => {
    const flags =
      'KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///run/containerd/containerd.sock --cloud-provider=external --node-ip=172.31.10.11"';
    assert.deepEqual(runProbe(undefined, flags, {}).kubelet, { cloudProvider: "external" });
    assert.deepEqual(runProbe(undefined, 'KUBELET_KUBEADM_ARGS="--node-ip=172.31.10.11"', {}).kubelet, {});
    assert.equal(runProbe(undefined, undefined, {}).kubelet, undefined, "no flags file: not a kubeadm kubelet");
  });

  it("reads the machine's identity from IMDSv2 (AWS) and the instance metadata service (Azure)", () => {
    assert.equal(runProbe("aws", undefined, AWS_IMDS).providerId, "aws:///eu-central-1b/i-0123456789abcdef0");
    assert.equal(runProbe("azure", undefined, { "compute/resourceId": VM }).providerId, `azure://${VM}`);
    assert.equal(runProbe("aws", undefined, {}).providerId, undefined, "no metadata service: no identity");
    assert.equal(
      runProbe("aws", undefined, { ...AWS_IMDS, "meta-data/instance-id": "<html>proxy error</html>" }).providerId,
      undefined,
      "an answer that is no instance id is no identity",
    );
    assert.equal(runProbe("vsphere", undefined, AWS_IMDS).providerId, undefined, "asked of AWS and Azure only");
  });

  describe("the kubelets' --cloud-provider against molt:bootstrap.cloudProvider", () => {
    const hosts: AdoptionHost[] = ["10.0.1.10", "10.0.1.11"].map((address) => ({
      address,
      sshHost: address,
      sshPort: 22,
    }));
    const facts = (...values: (string | undefined | null)[]) =>
      new Map(
        hosts.map((h, i) => [
          h,
          {
            ...stacked,
            ...(values[i] === null ? {} : { kubelet: values[i] ? { cloudProvider: values[i]! } : {} }),
          } as HostFacts,
        ]),
      );
    const check = (f: Map<AdoptionHost, HostFacts>, configured?: string) =>
      kubeletCloudProviderProblems(hosts, f, configured, "stacks/Pulumi.prod.yaml");

    it("accepts the kubelets and the stack agreeing", () => {
      assert.deepEqual(check(facts("external", "external"), "external"), []);
      assert.deepEqual(check(facts(undefined, undefined)), []);
      assert.deepEqual(
        check(facts(null, "external"), "external"),
        [],
        "a host without kubeadm's flags file is not asked",
      );
    });
    const refused: [string, Map<AdoptionHost, HostFacts>, string | undefined, RegExp][] = [
      [
        "external kubelets, a stack without it",
        facts("external", "external"),
        undefined,
        /run with --cloud-provider=external .*set molt:bootstrap\.cloudProvider: external in stacks\/Pulumi\.prod\.yaml/,
      ],
      [
        "a stack asking for it, kubelets without",
        facts(undefined, undefined),
        "external",
        /molt:bootstrap\.cloudProvider is external .*but the kubelets run without --cloud-provider/,
      ],
      [
        "kubelets that disagree",
        facts("external", undefined),
        "external",
        /disagree: 10\.0\.1\.10 runs --cloud-provider=external, 10\.0\.1\.11 runs no --cloud-provider/,
      ],
      ["an in-tree provider", facts("aws", "aws"), undefined, /--cloud-provider=aws, an in-tree provider/],
    ];
    for (const [what, f, configured, message] of refused)
      it(`refuses ${what}`, () => {
        const p = check(f, configured);
        assert.equal(p.length, 1);
        assert.match(p[0], message);
      });
  });

  describe("each host's machine, where molt will take adopted nodes out of a load balancer", () => {
    const hosts: AdoptionHost[] = ["10.0.1.10", "10.0.1.11"].map((address) => ({
      address,
      sshHost: address,
      sshPort: 22,
    }));
    const id = (i: number) => `aws:///eu-central-1a/i-0${i}23456789abcdef0`;
    const withIds = (...ids: (string | undefined)[]) =>
      new Map(hosts.map((h, i) => [h, { ...stacked, ...(ids[i] ? { providerId: ids[i] } : {}) } as HostFacts]));

    it("takes the metadata service's identity, checked against a machine named with --import", () => {
      const r = machineIdentities(hosts, withIds(id(0), id(1)), new Map([[hosts[0], "i-0023456789abcdef0"]]), true);
      assert.deepEqual(r.problems, []);
      assert.deepEqual([...r.providerIds.values()], [id(0), id(1)]);
    });

    it("refuses --import of another machine than the host's own", () => {
      const r = machineIdentities(hosts, withIds(id(0), id(1)), new Map([[hosts[1], "i-0923456789abcdef0"]]), true);
      assert.equal(r.problems.length, 1);
      assert.match(
        r.problems[0],
        /--import 10\.0\.1\.11=i-0923456789abcdef0: the host's metadata service says it is aws:\/\/\/eu-central-1a\/i-0123456789abcdef0/,
      );
    });

    it("refuses a host without an identity where the load balancer needs one, saying how to give it", () => {
      const r = machineIdentities(hosts, withIds(id(0), undefined), new Map(), true);
      assert.equal(r.problems.length, 1);
      assert.match(
        r.problems[0],
        /host 10\.0\.1\.11: its cloud metadata service \(169\.254\.169\.254\) did not say .*--import 10\.0\.1\.11=ID/,
      );
      assert.deepEqual(
        machineIdentities(hosts, withIds(id(0), undefined), new Map([[hosts[1], "i-0123456789abcdef1"]]), true)
          .problems,
        [],
      );
      assert.deepEqual(
        machineIdentities(hosts, withIds(undefined, undefined), new Map(), false).problems,
        [],
        "the lab, vSphere",
      );
    });
  });
});
