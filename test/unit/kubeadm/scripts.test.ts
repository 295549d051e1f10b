import * as assert from "node:assert/strict";
import { renderInitScript } from "../../../infra/kubeadm/init";
import { renderJoinScript } from "../../../infra/kubeadm/join";
import { renderResetScript } from "../../../infra/kubeadm/reset";
import { renderInitConfiguration } from "../../../infra/kubeadm/config";
import * as semver from "semver";
import { renderJoinMaterialScript } from "../../../infra/kubeadm/join-material";
import {
  InvalidBootstrapSettingError,
  type KubeadmBootstrapSettings,
  type KubeadmNode,
} from "../../../infra/kubeadm/settings";
import { bash, definitionsOf, shellcheck } from "./shell";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join as path } from "node:path";
import { parse, parseAllDocuments } from "yaml";

const settings: KubeadmBootstrapSettings = {
  controlPlaneEndpoint: "api.prod.example.com:6443",
  install: { source: "packages" },
  clusterName: "prod",
  podSubnet: "10.244.0.0/16",
  serviceSubnet: "10.96.0.0/12",
  apiServerCertSANs: ["api.prod.example.com", "10.0.0.10"],
  cniManifest: "https://example.com/calico.yaml",
};
const node: KubeadmNode = { name: "cp-g3-a", kubernetesVersion: "1.34.2", advertiseAddress: "10.0.1.15" };

const TOKEN = "abcdef.0123456789abcdef";
const CERT_KEY = "f".repeat(64);
const CA_HASH = `sha256:${"a".repeat(64)}`;

function every(): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const version of ["1.29.10", "1.31.4", "1.32.0", "1.34.2"]) {
    for (const install of [
      { source: "image" as const },
      { source: "packages" as const },
      { source: "packages" as const, repository: "https://mirror.example.com/k8s/core:/stable:" },
    ]) {
      const s = { ...settings, install };
      const n = { ...node, kubernetesVersion: version };
      out.push([`init ${version} ${install.source}`, renderInitScript(n, s)]);
      out.push([`join ${version} ${install.source}`, renderJoinScript(n, s)]);
    }
  }
  const ccm = { ...settings, cloudProvider: "external" as const };
  const identified = { ...node, providerId: "aws:///eu-central-1a/i-0123456789abcdef0" };
  out.push(["init with a providerID and --cloud-provider=external", renderInitScript(identified, ccm)]);
  out.push(["join with a providerID and --cloud-provider=external", renderJoinScript(identified, ccm)]);
  out.push(["reset (molt removes the member)", renderResetScript(node.name, settings)]);
  out.push([
    "reset (kubeadm removes the member)",
    renderResetScript(node.name, { ...settings, removeEtcdMemberOnReset: true }),
  ]);
  out.push(["join material", renderJoinMaterialScript({ joiningNode: "cp-g4-b" })]);
  out.push(["join material, 10m token", renderJoinMaterialScript({ joiningNode: "cp-g4-b", tokenTtl: "10m" })]);
  return out;
}

describe("rendered kubeadm scripts", () => {
  for (const [what, script] of every()) {
    it(`pass shellcheck at style level: ${what}`, () => {
      assert.equal(shellcheck(script), "");
    });
  }

  it("keep every input a single-quoted constant, so no value can become code", () => {
    const hostile = { ...settings, cniManifest: `x'; touch /tmp/molt-pwned; echo '$(id)\`id\`` };
    const script = renderInitScript(node, hostile);
    assert.equal(shellcheck(script), "");
    const r = bash(`${definitionsOf(script)}\nprintf '%s' "$CNI_MANIFEST"`);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, hostile.cniManifest);
  });

  it("refuse values that are not what they claim before rendering anything", () => {
    assert.throws(() => renderJoinScript({ ...node, name: "CP_1;reboot" }, settings), InvalidBootstrapSettingError);
    assert.throws(
      () => renderJoinScript({ ...node, advertiseAddress: "10.0.0.1; reboot" }, settings),
      InvalidBootstrapSettingError,
    );
    assert.throws(
      () => renderJoinScript(node, { ...settings, controlPlaneEndpoint: "api.example.com" }),
      InvalidBootstrapSettingError,
    );
    assert.throws(
      () => renderInitScript({ ...node, kubernetesVersion: "1.28.9" }, settings),
      /etcd learners only from 1.29/,
    );
    assert.throws(
      () => renderInitScript({ ...node, kubernetesVersion: "1.34.0-rc.1" }, settings),
      InvalidBootstrapSettingError,
    );
  });

  it("re-enter as root through sudo -n when the SSH user is not root", () => {
    const script = renderJoinScript(node, settings);
    assert.match(
      script,
      /sudo -n -- bash -euo pipefail -c "\$\(declare -p "\$\{constants\[@\]\}"\); \$\(declare -f\); main"/,
    );
  });

  describe("init of the first node of a new cluster", () => {
    const script = renderInitScript(node, settings);

    it("runs kubeadm init with uploaded certs and never prints the token or certificate key", () => {
      assert.match(
        script,
        /kubeadm init --config "\$MOLT_TMP" --upload-certs --skip-token-print --skip-certificate-key-print/,
      );
    });

    it("configures the load balancer as controlPlaneEndpoint, the node name and its address", () => {
      assert.match(script, /controlPlaneEndpoint: api\.prod\.example\.com:6443/);
      assert.match(script, /name: cp-g3-a/);
      assert.match(script, /advertiseAddress: 10\.0\.1\.15/);
      assert.match(script, /kubernetesVersion: v1\.34\.2/);
      assert.match(script, /podSubnet: 10\.244\.0\.0\/16/);
    });

    it("molt:encryptionAtRest: a key made on the node, root-only, and the API server pointed at it", () => {
      const enc = renderInitScript(node, { ...settings, encryptionAtRest: true });
      assert.match(
        enc,
        /- name: encryption-provider-config\n\s+value: \/etc\/kubernetes\/encryption-providers\/encryption/,
      );
      assert.match(
        enc,
        /hostPath: \/etc\/kubernetes\/encryption-providers\n\s+mountPath: \/etc\/kubernetes\/encryption/,
      );
      assert.match(enc, /head -c 32 \/dev\/urandom \| base64/);
      assert.match(enc, /umask 077/);
      assert.match(enc, /if \[ -n "\$ENCRYPTION_CONFIG" \]; then write_encryption_config; fi/);
      // v1beta3 (before 1.31) maps its flags.
      assert.match(
        renderInitScript({ ...node, kubernetesVersion: "1.30.5" }, { ...settings, encryptionAtRest: true }),
        /encryption-provider-config: \/etc\/kubernetes\/encryption-providers\/encryption-providers\.yaml/,
      );
      assert.doesNotMatch(script, /encryption-provider-config/);
      assert.match(script, /ENCRYPTION_CONFIG=''|ENCRYPTION_CONFIG=""/);
    });

    it("gives kube-apiserver a shutdown delay that covers the load balancer's health check", () => {
      const apiServerOf = (n: KubeadmNode, s: KubeadmBootstrapSettings) =>
        (
          parseAllDocuments(renderInitConfiguration(n, semver.parse(n.kubernetesVersion)!, s))
            .map((d) => d.toJS() as { kind: string; apiServer?: { extraArgs?: unknown } })
            .find((d) => d.kind === "ClusterConfiguration")!.apiServer ?? {}
        ).extraArgs;
      // v1beta4 lists the flags (every node that joins reads them from kubeadm-config).
      assert.deepEqual(apiServerOf(node, settings), [{ name: "shutdown-delay-duration", value: "60s" }]);
      assert.deepEqual(apiServerOf(node, { ...settings, apiServerShutdownDelaySeconds: 95, encryptionAtRest: true }), [
        { name: "shutdown-delay-duration", value: "95s" },
        { name: "encryption-provider-config", value: "/etc/kubernetes/encryption-providers/encryption-providers.yaml" },
      ]);
      // v1beta3 (before 1.31) maps them; 0 turns the delay off.
      assert.deepEqual(apiServerOf({ ...node, kubernetesVersion: "1.30.5" }, settings), {
        "shutdown-delay-duration": "60s",
      });
      assert.equal(apiServerOf(node, { ...settings, apiServerShutdownDelaySeconds: 0 }), undefined);
      assert.match(script, /shutdown-delay-duration/);
    });

    it("sets the EtcdLearnerMode gate only where it is still a gate (before 1.32)", () => {
      assert.match(renderInitScript({ ...node, kubernetesVersion: "1.31.4" }, settings), /EtcdLearnerMode: true/);
      assert.match(renderInitScript({ ...node, kubernetesVersion: "1.29.10" }, settings), /EtcdLearnerMode: true/);
      assert.doesNotMatch(renderInitScript({ ...node, kubernetesVersion: "1.32.0" }, settings), /EtcdLearnerMode/);
    });

    it("uses kubeadm's v1beta4 config from 1.31 and v1beta3 before", () => {
      assert.match(
        renderInitScript({ ...node, kubernetesVersion: "1.31.0" }, settings),
        /apiVersion: kubeadm\.k8s\.io\/v1beta4/,
      );
      assert.match(
        renderInitScript({ ...node, kubernetesVersion: "1.30.5" }, settings),
        /apiVersion: kubeadm\.k8s\.io\/v1beta3/,
      );
    });

    it("gives the bootstrap token kubeadm init creates a short lifetime", () => {
      assert.match(script, /ttl: 15m0s/);
    });
  });

  describe("join --control-plane", () => {
    const script = renderJoinScript(node, settings);

    it("contains no join secret: they arrive on stdin and are substituted for placeholders", () => {
      assert.match(script, /token: "@MOLT_BOOTSTRAP_TOKEN@"/);
      assert.match(script, /certificateKey: "@MOLT_CERTIFICATE_KEY@"/);
      assert.match(script, /kubeadm join --config "\$MOLT_TMP"/);
      assert.doesNotMatch(script, /--token|--certificate-key|--discovery-token/);
    });

    it("reads join material from stdin into a 0600 file that kubeadm reads", () => {
      const probe = [
        definitionsOf(script),
        "read_join_material",
        "require_join_material",
        "write_join_configuration",
        'stat -c %a "$MOLT_TMP" >&2',
        'cat "$MOLT_TMP"',
      ].join("\n");
      const r = bash(probe, `token=${TOKEN}\ncertificateKey=${CERT_KEY}\ncaCertHash=${CA_HASH}\n`);
      assert.equal(r.status, 0, r.stderr);
      assert.match(r.stderr, /^600$/m);
      assert.match(r.stdout, new RegExp(`token: "${TOKEN.replace(".", "\\.")}"`));
      assert.match(r.stdout, new RegExp(`certificateKey: "${CERT_KEY}"`));
      assert.match(r.stdout, new RegExp(`- "${CA_HASH}"`));
      assert.doesNotMatch(r.stdout, /@MOLT_/);
    });

    it("removes the file holding the secrets when the script exits", () => {
      const probe = [
        definitionsOf(script),
        "read_join_material",
        "write_join_configuration",
        'printf "%s" "$MOLT_TMP"',
      ].join("\n");
      const r = bash(probe, `token=${TOKEN}\ncertificateKey=${CERT_KEY}\ncaCertHash=${CA_HASH}\n`);
      assert.equal(r.status, 0, r.stderr);
      const check = bash(`[ ! -e '${r.stdout}' ]`);
      assert.equal(check.status, 0, `${r.stdout} still exists`);
    });

    it("refuses to join without valid join material, saying where it comes from, and never echoes what it got", () => {
      const probe = [definitionsOf(script), "read_join_material", "require_join_material"].join("\n");
      const bad = `token=not-a-token\ncertificateKey=${CERT_KEY}\ncaCertHash=${CA_HASH}\n`;
      const r = bash(probe, bad);
      assert.notEqual(r.status, 0);
      assert.match(r.stderr, /no valid bootstrap token on stdin: molt obtains fresh join material/);
      assert.doesNotMatch(r.stderr + r.stdout, /not-a-token|ffffffff/);
      assert.notEqual(bash(probe, "").status, 0);
    });

    it("treats an already joined node as done, and resets a half-joined one before joining again", () => {
      assert.match(script, /complete\)\n\s+log "\$NODE_NAME has already joined"\n\s+return 0/);
      assert.match(script, /partial\)[\s\S]*reset_partial_state[\s\S]*clean\)/);
      assert.match(script, /kubeadm reset --force --cri-socket "\$CRI_SOCKET"[\s\S]*rm -rf \/var\/lib\/etcd/);
    });

    it("reads stdin before anything else can consume it", () => {
      const main = script.slice(script.indexOf("main() {"));
      assert.ok(main.indexOf("read_join_material") < main.indexOf("install_or_verify_runtime"));
    });
  });

  describe("cloud controller manager settings: --cloud-provider and the kubelet's providerID", () => {
    const providerId = "aws:///eu-central-1a/i-0123456789abcdef0";
    const ccm = { ...settings, cloudProvider: "external" as const };
    /** The kubeadm configuration documents a script carries, parsed. */
    const kubeadmConfig = (script: string) => {
      const r = bash(`${definitionsOf(script)}\nprintf '%s' "$KUBEADM_CONFIG"`);
      assert.equal(r.status, 0, r.stderr);
      return parseAllDocuments(r.stdout).map((d) => d.toJS() as Record<string, Record<string, unknown>>);
    };

    for (const [version, kind, form] of [
      ["1.34.2", "v1beta4 list", [{ name: "cloud-provider", value: "external" }]],
      ["1.30.5", "v1beta3 map", { "cloud-provider": "external" }],
    ] as const)
      it(`passes --cloud-provider=external to the kubelet in kubeadm's ${kind} form`, () => {
        const n = { ...node, kubernetesVersion: version };
        const [init] = kubeadmConfig(renderInitScript(n, ccm));
        const [join] = kubeadmConfig(renderJoinScript(n, ccm));
        assert.deepEqual(init.nodeRegistration.kubeletExtraArgs, form);
        assert.deepEqual(join.nodeRegistration.kubeletExtraArgs, form);
      });

    it("passes no kubelet arguments when no cloud provider is configured", () => {
      const [join] = kubeadmConfig(renderJoinScript(node, settings));
      assert.equal(join.nodeRegistration.kubeletExtraArgs, undefined);
    });

    it("points kubeadm at the node's patches and writes its providerID there before kubeadm runs", () => {
      const script = renderJoinScript({ ...node, providerId }, settings);
      const [join] = kubeadmConfig(script);
      assert.deepEqual(join.patches, { directory: "/etc/kubernetes/molt-patches" });
      const main = script.slice(script.indexOf("main() {"));
      assert.ok(
        main.indexOf(
          'write_kubeadm_patches "$KUBEADM_PATCHES_DIR" "${JOIN_APISERVER_GRACE_SECONDS:-$APISERVER_GRACE_SECONDS}"',
        ) < main.indexOf("kubeadm join --config"),
      );
      const init = renderInitScript({ ...node, providerId }, settings);
      assert.deepEqual(kubeadmConfig(init)[0].patches, { directory: "/etc/kubernetes/molt-patches" });
      const initMain = init.slice(init.indexOf("main() {"));
      assert.ok(
        initMain.indexOf('write_kubeadm_patches "$KUBEADM_PATCHES_DIR" "$APISERVER_GRACE_SECONDS"') <
          initMain.indexOf("kubeadm init --config"),
      );

      const dir = mkdtempSync(path(tmpdir(), "molt-patches-"));
      try {
        const r = bash(`${definitionsOf(script)}\nwrite_kubeadm_patches '${dir}/patches' "$APISERVER_GRACE_SECONDS"`);
        assert.equal(r.status, 0, r.stderr);
        assert.deepEqual(readdirSync(path(dir, "patches")).sort(), [
          "kube-apiserver+strategic.yaml",
          "kubeletconfiguration+merge.yaml",
        ]);
        const patch = parse(readFileSync(path(dir, "patches", "kubeletconfiguration+merge.yaml"), "utf8"));
        assert.deepEqual(patch, { providerID: providerId });
        assert.match(r.stderr, /the kubelet's providerID: providerID: aws:\/\/\/eu-central-1a\/i-0123456789abcdef0/);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it("writes only the API server's patch for a node without a providerID, still before kubeadm runs", () => {
      const script = renderJoinScript(node, settings);
      assert.deepEqual(kubeadmConfig(script)[0].patches, { directory: "/etc/kubernetes/molt-patches" });
      const dir = mkdtempSync(path(tmpdir(), "molt-patches-"));
      try {
        const r = bash(`${definitionsOf(script)}\nwrite_kubeadm_patches '${dir}/patches' 125`);
        assert.equal(r.status, 0, r.stderr);
        assert.deepEqual(readdirSync(path(dir, "patches")), ["kube-apiserver+strategic.yaml"]);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it("takes every provider's providerID form, and refuses one that is not a provider id", () => {
      for (const id of [
        providerId,
        "azure:///subscriptions/s1/resourceGroups/rg_(prod).1/providers/Microsoft.Compute/virtualMachines/cp-1",
        "vsphere://4201a1e8-6f1c-2d3b-9b1a-0c5e2f3a4b5c",
      ])
        assert.doesNotThrow(() => renderJoinScript({ ...node, providerId: id }, settings));
      for (const id of ["i-0123456789abcdef0", "aws:///eu-central-1a/i-01'; reboot; '", "aws:///a b"])
        assert.throws(
          () => renderJoinScript({ ...node, providerId: id }, settings),
          /providerId: .*is not a provider id/,
        );
    });
  });

  describe("install or verify of the runtime", () => {
    it("only verifies when the image must carry the versions, and says what it found", () => {
      const script = renderJoinScript(node, { ...settings, install: { source: "image" } });
      assert.match(script, /readonly INSTALL_SOURCE='image'/);
      assert.match(script, /the image does not carry Kubernetes \$K8S_VERSION \(\$\(describe_installed\)\)/);
    });

    it("pins and holds the exact package version from the minor's pkgs.k8s.io repository", () => {
      const script = renderJoinScript(node, settings);
      assert.match(script, /readonly K8S_MINOR='v1\.34'/);
      assert.match(script, /readonly PACKAGE_REPOSITORY='https:\/\/pkgs\.k8s\.io\/core:\/stable:'/);
      assert.match(script, /"kubeadm=\$K8S_VERSION-\*"/);
      assert.match(script, /apt-mark hold kubelet kubeadm kubectl/);
      assert.match(script, /"kubeadm-\$K8S_VERSION"/);
    });

    it("verifies exact versions of kubeadm, kubelet and kubectl", () => {
      const script = renderJoinScript(node, settings);
      const probe = (kubeadm: string, kubelet: string, kubectl: string | null = "v1.34.2") =>
        bash(
          `${definitionsOf(script)}\nkubeadm() { echo ${kubeadm}; }\nkubelet() { echo "Kubernetes ${kubelet}"; ` +
            `}\ncontainerd() { :; }\n` +
            (kubectl
              ? `kubectl() { printf '{\\n  "clientVersion": {\\n    "gitVersion": "%s",\\n    "major": "1"\\n  ` +
                `}\\n}\\n' ${kubectl}; }\n`
              : "") +
            "if installed_versions_match; then echo match; else echo differ; fi",
        ).stdout.trim();
      assert.equal(probe("v1.34.2", "v1.34.2"), "match");
      assert.equal(probe("v1.34.1", "v1.34.2"), "differ");
      assert.equal(probe("v1.34.2", "v1.33.9"), "differ");
      // Every join runs kubectl (kubeadm-config, join material): an image without it, or
      // with another version, is not the image the stack asks for.
      assert.equal(probe("v1.34.2", "v1.34.2", null), "differ");
      assert.equal(probe("v1.34.2", "v1.34.2", "v1.33.9"), "differ");
    });
  });

  describe("reset on delete", () => {
    it("leaves etcd membership to molt by default and wipes the etcd data dir", () => {
      const script = renderResetScript(node.name, settings);
      assert.match(script, /readonly RESET_PHASES_TO_SKIP='remove-etcd-member'/);
      assert.match(script, /kubeadm reset --force --cri-socket "\$CRI_SOCKET" --skip-phases "\$RESET_PHASES_TO_SKIP"/);
      assert.match(script, /rm -rf \/var\/lib\/etcd/);
    });

    it("lets kubeadm remove the member when asked to", () => {
      assert.match(renderResetScript(node.name, { removeEtcdMemberOnReset: true }), /readonly RESET_PHASES_TO_SKIP=''/);
    });

    it("succeeds on a node where kubeadm never ran", () => {
      const script = renderResetScript(node.name, settings);
      assert.match(script, /kubeadm is not installed on \$NODE_NAME: nothing to reset/);
      assert.match(script, /holds no kubeadm state: nothing to reset/);
    });
  });
});
