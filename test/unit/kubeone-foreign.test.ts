// The KubeOne-faithful lab cluster's kubeadm configuration (test/support/kubeone-foreign.ts).
// lab-kubelet runs static pods as plain processes and ignores their volumes, so a lab run
// cannot tell whether the files kube-apiserver is pointed at would be mounted into its
// container on a real node: these rows check that, as KubeOne's configuration does it.
import * as assert from "node:assert/strict";
import { posix } from "node:path";
import { parse } from "yaml";
import { clusterConfiguration, featureFiles, KUBEONE_FILES, type Plan } from "../support/kubeone-foreign";

const plan: Plan = {
  clusterName: "ko",
  endpoint: "10.0.0.2:6443",
  certSANs: ["10.0.0.2"],
  token: "abcdef.0123456789abcdef",
  externalCloudProvider: true,
};
interface Volume {
  name: string;
  hostPath: string;
  mountPath: string;
  readOnly: boolean;
  pathType: string;
}
const cc = clusterConfiguration(plan, "v1.36.3") as {
  apiServer: { extraArgs: { name: string; value: string }[]; extraVolumes: Volume[] };
};
const arg = (name: string) => cc.apiServer.extraArgs.find((a) => a.name === name)?.value;
const volumeFor = (path: string) =>
  cc.apiServer.extraVolumes.find((v) => path === v.hostPath || path.startsWith(v.hostPath + "/"));

describe("the KubeOne-faithful cluster's kubeadm configuration", () => {
  it("mounts every file kube-apiserver's extraArgs name (outside kubeadm's own /etc/kubernetes/pki)", () => {
    const files = cc.apiServer.extraArgs
      .filter((a) => a.value.startsWith("/") && !a.value.startsWith("/etc/kubernetes/pki/"))
      .map((a) => a.value);
    assert.deepEqual(
      files.sort(),
      [
        ...Object.values(KUBEONE_FILES).filter((f) => !f.endsWith("podnodeselector.yaml")),
        "/var/log/kubernetes/audit.log",
      ].sort(),
    );
    for (const f of files) {
      const v = volumeFor(f);
      assert.ok(v, `${f} is in no extraVolume`);
      assert.equal(v.mountPath, v.hostPath, f);
      assert.equal(v.pathType, "DirectoryOrCreate", f);
    }
  });

  it("mounts the configuration read-only and the audit log's directory writable", () => {
    assert.equal(volumeFor(arg("audit-log-path")!)!.readOnly, false);
    for (const f of ["encryption-provider-config", "audit-policy-file", "admission-control-config-file"])
      assert.equal(volumeFor(arg(f)!)!.readOnly, true, f);
  });

  it("points the admission configuration at a PodNodeSelector file in the mounted directory", () => {
    const files = featureFiles("kubeone-abcdef", Buffer.alloc(32).toString("base64"));
    const admission = parse(files["admission-config.yaml"]) as { plugins: { name: string; path: string }[] };
    assert.deepEqual(admission.plugins, [{ name: "PodNodeSelector", path: KUBEONE_FILES.podNodeSelectorConfig }]);
    assert.equal(posix.dirname(volumeFor(KUBEONE_FILES.podNodeSelectorConfig)!.hostPath), "/etc/kubernetes");
    assert.match(arg("enable-admission-plugins")!, /(^|,)PodNodeSelector(,|$)/);
    assert.ok(files["podnodeselector.yaml"]);
  });

  it("encrypts Secrets with aescbc first (a 32-byte key) and still reads plaintext (identity)", () => {
    const key = Buffer.alloc(32, 7).toString("base64");
    const enc = parse(featureFiles("kubeone-abcdef", key)["encryption-providers.yaml"]) as {
      resources: { resources: string[]; providers: Record<string, unknown>[] }[];
    };
    assert.deepEqual(enc.resources[0].resources, ["secrets"]);
    assert.deepEqual(enc.resources[0].providers, [
      { aescbc: { keys: [{ name: "kubeone-abcdef", secret: key }] } },
      { identity: {} },
    ]);
  });
});
