// Pure parts of the Kubernetes edge: image tags, kubeconfig credentials, the hand-over of a
// retiring node's leader Leases (which pods a drain evicts: test/unit/drain.test.ts).
import * as assert from "node:assert/strict";
import { credentialsOf, tagVersion } from "../../orchestrator/edges/kube";
import { releasedLease } from "../../orchestrator/edges/kube-support";

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

  describe("a retiring node's leader Lease (releasedLease)", () => {
    const renewed = new Date("2026-12-03T22:00:00Z");
    const now = new Date("2026-12-03T22:00:05Z");
    const held = (holderIdentity: string) => ({
      holderIdentity,
      leaseDurationSeconds: 15,
      acquireTime: renewed,
      renewTime: renewed,
      leaseTransitions: 4,
    });

    it("hands on a Lease the stopped node's component holds, as client-go's release writes it", () => {
      assert.deepEqual(releasedLease(held("molt-cp-2_5f1c9a2e-1b2c-4d5e-8f90-123456789abc"), "molt-cp-2", now), {
        holderIdentity: "",
        leaseDurationSeconds: 1,
        acquireTime: now,
        renewTime: now,
        leaseTransitions: 4,
      });
      assert.equal(releasedLease(held("molt-cp-2"), "molt-cp-2", now)?.holderIdentity, "");
    });

    it("leaves another node's Lease alone, a name prefix included", () => {
      assert.equal(releasedLease(held("molt-cp-3_5f1c9a2e"), "molt-cp-2", now), undefined);
      assert.equal(releasedLease(held("molt-cp-20_5f1c9a2e"), "molt-cp-2", now), undefined);
      assert.equal(releasedLease(held("x-molt-cp-2_5f1c9a2e"), "molt-cp-2", now), undefined);
    });

    it("writes nothing when there is no holder or no spec", () => {
      assert.equal(releasedLease(held(""), "molt-cp-2", now), undefined);
      assert.equal(releasedLease({}, "molt-cp-2", now), undefined);
      assert.equal(releasedLease(undefined, "molt-cp-2", now), undefined);
    });
  });
});
