// The host files a new control-plane node needs before `kubeadm join` (orchestrator/core/host-files.ts),
// from the ClusterConfiguration as kubeadm-config holds it (infra/kubeadm/cluster-config.ts).
import * as assert from "node:assert/strict";
import { parse } from "yaml";
import { hostFilesOf, isFileFlag, missingHostFiles, type HostFile } from "../../orchestrator/core/host-files";
import { clusterConfigRefs } from "../../infra/kubeadm/cluster-config";
import {
  carryHostFiles,
  renderDigestScript,
  renderPackScript,
  renderUnpackScript,
  type HostFilesEdges,
  type HostFilesSession,
} from "../../infra/kubeadm/host-files";
import type { SshTarget } from "../../infra/remote/ssh";

// kubeadm v1beta4, the way KubeOne writes it with encryption providers, a static audit log,
// PodNodeSelector (an admission configuration) and an OIDC CA switched on.
const KUBEONE_V1BETA4 = `
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v1.36.3
controlPlaneEndpoint: 10.0.0.10:6443
apiServer:
  extraArgs:
  - name: encryption-provider-config
    value: /etc/kubernetes/encryption-providers/encryption-providers.yaml
  - name: admission-control-config-file
    value: /etc/kubernetes/admission/admission-config.yaml
  - name: enable-admission-plugins
    value: NodeRestriction,PodNodeSelector
  - name: audit-policy-file
    value: /etc/kubernetes/audit/policy.yaml
  - name: audit-log-path
    value: /var/log/kubernetes/audit.log
  - name: oidc-ca-file
    value: /etc/kubernetes/pki/oidc-ca.crt
  - name: service-account-key-file
    value: /etc/kubernetes/pki/sa.pub
  - name: profiling
    value: "false"
  extraVolumes:
  - name: encryption-providers-conf
    hostPath: /etc/kubernetes/encryption-providers
    mountPath: /etc/kubernetes/encryption-providers
    readOnly: true
  - name: admission-conf
    hostPath: /etc/kubernetes/admission
    mountPath: /etc/kubernetes/admission
    readOnly: true
  - name: audit-conf
    hostPath: /etc/kubernetes/audit
    mountPath: /etc/kubernetes/audit
    readOnly: true
  - name: log
    hostPath: /var/log/kubernetes
    mountPath: /var/log/kubernetes
    pathType: DirectoryOrCreate
  - name: usr-share-ca-certificates
    hostPath: /usr/share/ca-certificates
    mountPath: /usr/share/ca-certificates
    readOnly: true
controllerManager:
  extraArgs:
  - name: cloud-config
    value: /etc/kubernetes/cloud-config
  - name: authentication-kubeconfig
    value: /etc/kubernetes/controller-manager.conf
  extraVolumes:
  - name: cloud-config
    hostPath: /etc/kubernetes/cloud-config
    mountPath: /etc/kubernetes/cloud-config
    readOnly: true
    pathType: File
scheduler: {}
`;

const paths = (fs: HostFile[]) => fs.map((f) => `${f.action} ${f.path}`);

describe("the cluster's host files (core/host-files.ts)", () => {
  it("a KubeOne cluster: its encryption, admission, audit, OIDC and cloud-config files; the audit log dir made", () => {
    const files = hostFilesOf(clusterConfigRefs(parse(KUBEONE_V1BETA4)));
    assert.deepEqual(paths(files), [
      "copy /etc/kubernetes/admission",
      "copy /etc/kubernetes/audit",
      "copy /etc/kubernetes/cloud-config",
      "copy /etc/kubernetes/encryption-providers",
      "copy /etc/kubernetes/pki/oidc-ca.crt",
      "create /var/log/kubernetes",
    ]);
    assert.equal(
      files.find((f) => f.path === "/etc/kubernetes/pki/oidc-ca.crt")?.why,
      "apiServer.extraArgs oidc-ca-file",
    );
    assert.equal(
      files.find((f) => f.path === "/etc/kubernetes/encryption-providers")?.why,
      "apiServer.extraVolumes encryption-providers-conf",
    );
  });

  it("v1beta3's extraArgs map reads the same as v1beta4's list", () => {
    const v3 = {
      apiServer: {
        extraArgs: { "encryption-provider-config": "/etc/kubernetes/enc/enc.yaml" },
        extraVolumes: [
          { name: "enc", hostPath: "/etc/kubernetes/enc", mountPath: "/etc/kubernetes/enc", readOnly: true },
        ],
      },
    };
    const v4 = {
      apiServer: {
        extraArgs: [{ name: "encryption-provider-config", value: "/etc/kubernetes/enc/enc.yaml" }],
        extraVolumes: v3.apiServer.extraVolumes,
      },
    };
    assert.deepEqual(hostFilesOf(clusterConfigRefs(v3)), hostFilesOf(clusterConfigRefs(v4)));
    assert.deepEqual(paths(hostFilesOf(clusterConfigRefs(v3))), ["copy /etc/kubernetes/enc"]);
  });

  it("a flag's container path is read through its mount (another host directory)", () => {
    const cc = {
      apiServer: {
        extraArgs: { "audit-policy-file": "/audit/policy.yaml" },
        extraVolumes: [{ name: "a", hostPath: "/srv/audit", mountPath: "/audit", readOnly: true }],
      },
    };
    // The volume itself is carried; the flag's file is inside it, so it is not listed twice.
    assert.deepEqual(paths(hostFilesOf(clusterConfigRefs(cc))), ["copy /srv/audit"]);
    const single = {
      apiServer: {
        extraArgs: { "audit-policy-file": "/audit/policy.yaml" },
        extraVolumes: [{ name: "a", hostPath: "/srv/pol.yaml", mountPath: "/audit/policy.yaml", pathType: "File" }],
      },
    };
    assert.deepEqual(paths(hostFilesOf(clusterConfigRefs(single))), ["copy /srv/pol.yaml"]);
  });

  it("leaves out what kubeadm distributes or makes (CAs, keys, node certs, kubeconfigs), and host trust stores", () => {
    const cc = {
      apiServer: {
        extraArgs: {
          "client-ca-file": "/etc/kubernetes/pki/ca.crt",
          "tls-cert-file": "/etc/kubernetes/pki/apiserver.crt",
          "etcd-cafile": "/etc/kubernetes/pki/etcd/ca.crt",
          "kubelet-client-certificate": "/etc/kubernetes/pki/apiserver-kubelet-client.crt",
        },
        extraVolumes: [
          { name: "ca", hostPath: "/etc/ssl/certs", mountPath: "/etc/ssl/certs", readOnly: true },
          { name: "tz", hostPath: "/etc/localtime", mountPath: "/etc/localtime", readOnly: true },
        ],
      },
      scheduler: { extraArgs: { kubeconfig: "/etc/kubernetes/scheduler.conf" } },
    };
    assert.deepEqual(hostFilesOf(clusterConfigRefs(cc)), []);
  });

  it("never carries (or wipes) a mount that holds kubeadm's own trees or is as broad as /etc", () => {
    const vol = (hostPath: string) => ({ name: hostPath, hostPath, mountPath: hostPath, readOnly: true });
    for (const broad of ["/etc", "/opt", "/etc/kubernetes", "/var/lib", "/var/lib/etcd", "/etc/kubernetes/pki"]) {
      const cc = { apiServer: { extraVolumes: [vol(broad)] } };
      assert.deepEqual(hostFilesOf(clusterConfigRefs(cc)), [], broad);
    }
    const ok = { apiServer: { extraVolumes: [vol("/etc/kubernetes/audit")] } };
    assert.deepEqual(paths(hostFilesOf(clusterConfigRefs(ok))), ["copy /etc/kubernetes/audit"]);
  });

  it("a flag pointing at an unmounted host path is not carried (the component could not read it)", () => {
    const cc = { apiServer: { extraArgs: { "authorization-config": "/etc/authz/config.yaml" } } };
    assert.deepEqual(hostFilesOf(clusterConfigRefs(cc)), []);
  });

  it("the scheduler's --config file and a webhook config are carried", () => {
    const cc = {
      apiServer: {
        extraArgs: { "authentication-token-webhook-config-file": "/etc/kubernetes/pki/webhook.kubeconfig" },
      },
      scheduler: {
        extraArgs: { config: "/etc/kubernetes/scheduler/config.yaml" },
        extraVolumes: [
          { name: "s", hostPath: "/etc/kubernetes/scheduler", mountPath: "/etc/kubernetes/scheduler", readOnly: true },
        ],
      },
    };
    assert.deepEqual(paths(hostFilesOf(clusterConfigRefs(cc))), [
      "copy /etc/kubernetes/pki/webhook.kubeconfig",
      "copy /etc/kubernetes/scheduler",
    ]);
  });

  it("garbage in kubeadm-config yields no files, not a crash", () => {
    for (const cc of [null, "text", 42, [], { apiServer: { extraArgs: 7, extraVolumes: "x" } }])
      assert.deepEqual(hostFilesOf(clusterConfigRefs(cc)), []);
  });

  it("isFileFlag: file-like flags with absolute values, not outputs", () => {
    assert.ok(isFileFlag("encryption-provider-config", "/x"));
    assert.ok(isFileFlag("oidc-ca-file", "/x"));
    assert.ok(!isFileFlag("oidc-ca-file", "relative"));
    assert.ok(!isFileFlag("audit-log-path", "/var/log/audit.log"));
    assert.ok(!isFileFlag("enable-admission-plugins", "/x"));
    for (const f of ["etcd-cafile", "etcd-certfile", "etcd-keyfile", "kubelet-certificate-authority"])
      assert.ok(isFileFlag(f, "/etc/kubernetes/custom/x.pem"), f);
  });

  it("missingHostFiles names the carried files a node lacks", () => {
    const files = hostFilesOf(clusterConfigRefs(parse(KUBEONE_V1BETA4)));
    const present = files.map((f) => f.path).filter((p) => p !== "/etc/kubernetes/encryption-providers");
    assert.deepEqual(
      missingHostFiles(files, present).map((f) => f.path),
      ["/etc/kubernetes/encryption-providers"],
    );
    // A directory only made on the new node is not required on the source.
    assert.deepEqual(
      missingHostFiles(
        files,
        present.concat("/etc/kubernetes/encryption-providers").filter((p) => !p.startsWith("/var/log")),
      ),
      [],
    );
  });
});

describe("carrying them (infra/kubeadm/host-files.ts scripts)", () => {
  const files = hostFilesOf(clusterConfigRefs(parse(KUBEONE_V1BETA4)));
  it("packs the carried paths relative to /, keeping owners, and refuses what is missing or too big", () => {
    const s = renderPackScript(files);
    assert.match(
      s,
      /tar -C \/ --numeric-owner -h -czf - 'etc\/kubernetes\/admission' .*'etc\/kubernetes\/pki\/oidc-ca.crt'/,
    );
    assert.ok(!s.includes("var/log"), "the audit log directory's contents are never copied");
    assert.match(s, /lacks/);
    assert.match(s, /exit 3/);
    assert.match(s, /more than \d+/);
  });
  it("unpacks with owners and modes, then makes the directories components write into", () => {
    const s = renderUnpackScript(files);
    assert.match(s, /base64 -d \| tar -C \/ --numeric-owner -xzpf -/);
    assert.match(s, /mkdir -p '\/var\/log\/kubernetes'/);
  });
  it("digests every regular file in a stable order", () => {
    assert.match(renderDigestScript(files), /find -L .* -type f -print0 \| sort -z \| xargs -0 -r sha256sum/);
  });
});

describe("carrying them: the connections (infra/kubeadm/host-files.ts carryHostFiles)", () => {
  const files = hostFilesOf(clusterConfigRefs(parse(KUBEONE_V1BETA4)));
  const SUMS = `${"a".repeat(64)}  /etc/kubernetes/admission/admission-config.yaml\n`;
  const target = (host: string): SshTarget => ({ host, port: 22, user: "root", hostKey: "ssh-ed25519 AAAA" });
  const inputs = { from: target("10.0.0.5"), to: target("10.0.0.9"), node: "cp-g4-b", files };

  /** The healthy node answers at once; the new one refuses `refusals` attempts (still booting), then serves. */
  function edges(refusals: number, deadlineMs = 30_000) {
    const attempts: Record<string, number> = {};
    const session: HostFilesSession = {
      async run(command: string) {
        return command.includes("sha256sum") ? SUMS : command.includes("tar -C / --numeric-owner -h") ? "dGFy" : "";
      },
      close() {},
    };
    const e: HostFilesEdges = {
      firstBootDeadlineMs: deadlineMs,
      async connect(t) {
        attempts[t.host] = (attempts[t.host] ?? 0) + 1;
        if (t.host === "10.0.0.9" && attempts[t.host] <= refusals) throw new Error(`connect ECONNREFUSED ${t.host}:22`);
        return session as never;
      },
    };
    return { e, attempts };
  }

  it("a new machine still booting: its connection is retried as the other first-boot steps' is", async () => {
    const { e, attempts } = edges(3);
    const out = await carryHostFiles(inputs, e);
    assert.deepEqual(out.copied, ["/etc/kubernetes/admission/admission-config.yaml"]);
    assert.equal(attempts["10.0.0.9"], 4);
    assert.equal(attempts["10.0.0.5"], 1, "the healthy source is connected once");
  });

  it("one that never answers fails at the first-boot deadline, saying which machine", async () => {
    const { e } = edges(Infinity, 300);
    await assert.rejects(carryHostFiles(inputs, e), /10\.0\.0\.9:22/);
  });
});
