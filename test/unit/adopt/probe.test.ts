// What a host to adopt runs (orchestrator/adopt/probe.ts) and which hosts are kubeadm-made
// stacked etcd (stackedEtcdProblems): external etcd and the wrong kind are refused by name.
import * as assert from "node:assert/strict";
import { stackedEtcdProblems } from "../../../orchestrator/adopt";
import type { AdoptionHost } from "../../../orchestrator/adopt/input";
import { parseProbe, probeScript, type HostFacts } from "../../../orchestrator/adopt/probe";
import { shellcheck } from "../kubeadm/shell";

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
