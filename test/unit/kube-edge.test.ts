// Pure parts of the Kubernetes edge: image tags, kubeconfig credentials (which pods a drain
// evicts: test/unit/drain.test.ts).
import * as assert from "node:assert/strict";
import { credentialsOf, tagVersion } from "../../orchestrator/edges/kube";

describe("Kubernetes edge helpers (orchestrator/edges/kube.ts)", () => {
  it("reads the version from an image tag", () => {
    assert.equal(tagVersion("registry.k8s.io/kube-proxy:v1.37.2"), "1.37.2");
    assert.equal(tagVersion("localhost:5000/kube-proxy:v1.36.3@sha256:abc"), "1.36.3");
  });

  it("takes embedded credentials from a kubeconfig and refuses one without them", () => {
    const b = (s: string) => Buffer.from(s).toString("base64");
    const kc = `apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: ${b("CA")}\n    server: https://10.0.0.1:6443\n  name: k\nusers:\n- name: admin\n  user:\n    client-certificate-data: ${b("CERT")}\n    client-key-data: ${b("KEY")}\n`;
    assert.deepEqual(credentialsOf(kc), { ca: "CA", cert: "CERT", key: "KEY" });
    assert.equal(credentialsOf(kc.replace(/client-key-data.*\n/, "")), undefined);
    assert.equal(credentialsOf("not: [a, kubeconfig"), undefined);
  });
});
