// kubeadm-config raised to a version whose etcd (3.7) dropped the experimental-* flags that
// KubeOne's ClusterConfiguration passes (infra/kubeadm/cluster-config.ts).
import * as assert from "node:assert/strict";
import { clusterConfigurationAt } from "../../../infra/kubeadm/cluster-config";

const kubeone = (extraArgs: unknown) => ({
  kubernetesVersion: "v1.36.3",
  etcd: { local: { dataDir: "/var/lib/etcd", extraArgs } },
});

describe("etcd's experimental flags when kubeadm-config moves to etcd 3.7", () => {
  it("KubeOne's two flags (v1beta4 list): a feature gate and a renamed flag, the rest kept", () => {
    const out = clusterConfigurationAt(
      kubeone([
        { name: "experimental-compact-hash-check-enabled", value: "true" },
        { name: "experimental-corrupt-check-time", value: "240m" },
        { name: "listen-metrics-urls", value: "http://127.0.0.1:2381" },
      ]),
      "1.37.2",
    );
    assert.deepEqual((out.etcd as { local: { extraArgs: unknown } }).local.extraArgs, [
      { name: "corrupt-check-time", value: "240m" },
      { name: "listen-metrics-urls", value: "http://127.0.0.1:2381" },
      { name: "feature-gates", value: "CompactHashCheck=true" },
    ]);
    assert.equal((out.etcd as { local: { dataDir: string } }).local.dataDir, "/var/lib/etcd");
  });

  it("v1beta3 map, merged into existing feature gates", () => {
    const out = clusterConfigurationAt(
      kubeone({ "experimental-initial-corrupt-check": "true", "feature-gates": "LeaseCheckpoint=true" }),
      "1.37.0",
    );
    assert.deepEqual((out.etcd as { local: { extraArgs: unknown } }).local.extraArgs, {
      "feature-gates": "InitialCorruptCheck=true,LeaseCheckpoint=true",
    });
  });

  it("left alone below 1.37 (etcd 3.6 still takes them) and when there are none", () => {
    const cc = kubeone([{ name: "experimental-corrupt-check-time", value: "240m" }]);
    assert.deepEqual(clusterConfigurationAt(cc, "1.36.5").etcd, cc.etcd);
    const plain = kubeone([{ name: "listen-metrics-urls", value: "http://127.0.0.1:2381" }]);
    assert.deepEqual(clusterConfigurationAt(plain, "1.37.2").etcd, plain.etcd);
  });
});
