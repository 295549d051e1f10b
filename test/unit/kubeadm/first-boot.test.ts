// Issue #16 items 4, 7, 8, 9, 12, 13, 14 in the rendered scripts: run in bash with the
// node's commands stubbed as shell functions, and shellcheck on every variant.
import * as assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse as parseYaml } from "yaml";
import {
  clusterConfigurationAt,
  raiseClusterConfiguration,
  removedFeatureGates,
} from "../../../infra/kubeadm/cluster-config";
import { renderInitScript } from "../../../infra/kubeadm/init";
import { renderJoinMaterialScript } from "../../../infra/kubeadm/join-material";
import { renderJoinScript } from "../../../infra/kubeadm/join";
import type { KubeadmBootstrapSettings, KubeadmNode } from "../../../infra/kubeadm/settings";
import { bash, definitionsOf, shellcheck } from "./shell";

const settings: KubeadmBootstrapSettings = {
  controlPlaneEndpoint: "api.prod.example.com:6443",
  install: { source: "packages" },
  clusterName: "prod",
  cniManifest: "https://mirror.example.com/kube-flannel.yml",
};
const node: KubeadmNode = { name: "cp-g3-a", kubernetesVersion: "1.34.2", advertiseAddress: "10.0.1.15" };
const join_ = renderJoinScript(node, settings);
const defs = definitionsOf(join_);
/** Runs `body` after the script's definitions, with the stubs given. */
const run = (body: string, stubs = "") => bash(`${defs}\n${stubs}\n${body}`);

describe("first boot and the node runtime (rendered scripts)", () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), "molt-first-boot-"))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  describe("waits for first boot before installing", () => {
    const stubs = (cloudInitExit: number, aptDailyRuns = 0) => `
cloud-init() { echo "cloud-init $*" >>"${"$"}CALLS"; return ${cloudInitExit}; }
timeout() { shift; "$@"; }
runs=${aptDailyRuns}
systemctl() { if [ "$1" = is-active ] && [ "$runs" -gt 0 ]; then runs=$((runs - 1)); return 0; fi; return 3; }
sleep() { :; }`;
    const wait = (cloudInitExit: number, aptDailyRuns = 0) =>
      bash(`CALLS=${dir}/calls\n${defs}\n${stubs(cloudInitExit, aptDailyRuns)}\nwait_for_first_boot && echo ready`);

    it("waits for cloud-init status --wait, then for the distribution's apt runs, then goes on", () => {
      const r = wait(0, 2);
      assert.equal(r.stdout.trim(), "ready", r.stderr);
      assert.equal(readFileSync(join(dir, "calls"), "utf8").trim(), "cloud-init status --wait");
      assert.match(r.stderr, /waiting for cloud-init to finish first boot \(at most 600s\)/);
    });

    it("goes on after cloud-init's recoverable errors (exit 2), stops on a failed first boot or a timeout", () => {
      assert.equal(wait(2).stdout.trim(), "ready");
      const failed = wait(1);
      assert.notEqual(failed.status, 0);
      assert.match(failed.stderr, /cloud-init failed first boot \(exit 1\): see \/var\/log\/cloud-init\.log/);
      const slow = wait(124);
      assert.notEqual(slow.status, 0);
      assert.match(slow.stderr, /did not finish first boot within 600s/);
    });

    it("is the first thing install_or_verify_runtime does, and every apt-get waits for the dpkg lock", () => {
      assert.match(join_, /install_or_verify_runtime\(\) \{\n {2}wait_for_first_boot\n/);
      assert.match(join_, /apt-get -o DPkg::Lock::Timeout="\$LOCK_TIMEOUT" "\$@"/);
      const apt = join_.slice(join_.indexOf("install_packages_apt() {"), join_.indexOf("refuse_rhel_policies() {"));
      assert.doesNotMatch(apt, /^\s+apt-get /m, "no apt-get call bypasses the lock timeout");
    });
  });

  describe("containerd's sandbox image follows kubeadm's", () => {
    const align = (config: string, pause = "harbor.example.com/k8s/pause:3.10") => {
      writeFileSync(join(dir, "in.toml"), config);
      const r = run(`align_containerd_config ${dir}/in.toml ${dir}/out.toml '${pause}' && echo ok`);
      return { ...r, out: r.status === 0 ? readFileSync(join(dir, "out.toml"), "utf8") : "" };
    };

    it("sets containerd 1.x's sandbox_image and systemd cgroups", () => {
      const r = align(
        `[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "registry.k8s.io/pause:3.8"\n` +
          `  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]\n    SystemdCgroup = false\n`,
      );
      assert.equal(r.stdout.trim(), "ok", r.stderr);
      assert.match(r.out, /^ {2}sandbox_image = "harbor\.example\.com\/k8s\/pause:3\.10"$/m);
      assert.match(r.out, /SystemdCgroup = true/);
    });

    it("sets containerd 2.x's pinned sandbox image", () => {
      const r = align(
        `[plugins.'io.containerd.cri.v1.images'.pinned_images]\n  sandbox = 'registry.k8s.io/pause:3.10'\n` +
          `[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]\n  sandbox_mode = 'podsandbox'\n`,
      );
      assert.equal(r.stdout.trim(), "ok", r.stderr);
      assert.match(r.out, /^ {2}sandbox = 'harbor\.example\.com\/k8s\/pause:3\.10'$/m);
      assert.match(r.out, /sandbox_mode = 'podsandbox'/, "other sandbox_* keys are left alone");
    });

    it("refuses a config that names no sandbox image, saying what to add", () => {
      const r = align(`version = 2\n`);
      assert.notEqual(r.status, 0);
      assert.match(r.stderr, /names no sandbox image to align with kubeadm's harbor\.example\.com\/k8s\/pause:3\.10/);
    });

    it("asks kubeadm for the pause image of the node's version in the configured repository", () => {
      const script = renderJoinScript(node, { ...settings, imageRepository: "harbor.example.com/k8s" });
      const r = bash(
        `${definitionsOf(script)}\nkubeadm() { echo "$*" >${dir}/args; printf '%s\\n' ` +
          `harbor.example.com/k8s/kube-apiserver:v1.34.2 harbor.example.com/k8s/pause:3.10; }\nkubeadm_pause_image`,
      );
      assert.equal(r.stdout.trim(), "harbor.example.com/k8s/pause:3.10");
      assert.equal(
        readFileSync(join(dir, "args"), "utf8").trim(),
        "config images list --kubernetes-version v1.34.2 --image-repository harbor.example.com/k8s",
      );
    });
  });

  describe("RHEL family (dnf)", () => {
    const stubs = (available: string[], selinux = "Permissive", firewalld = false) => `
rpm() { return 1; }
dnf() { for p in ${available.join(" ") || "none"}; do [ "$4" = "$p" ] && return 0; done; return 1; }
getenforce() { echo ${selinux}; }
systemctl() { [ "$*" = "is-active --quiet firewalld" ] && ${firewalld ? "return 0" : "return 3"}; return 3; }`;

    it("installs containerd where the distribution ships it, containerd.io where Docker's repository is set up", () => {
      assert.equal(run("containerd_package_dnf", stubs(["containerd"])).stdout.trim(), "containerd");
      assert.equal(run("containerd_package_dnf", stubs(["containerd.io"])).stdout.trim(), "containerd.io");
    });

    it("refuses RHEL, Rocky or Alma without a containerd package, and says where it comes from", () => {
      const r = run("install_packages_dnf", stubs([]));
      assert.notEqual(r.status, 0);
      assert.match(r.stderr, /no containerd package .*RHEL, Rocky and Alma ship none.*containerd\.io repository/);
    });

    it("refuses SELinux enforcing and an active firewalld before changing anything", () => {
      const enforcing = run("install_packages_dnf", stubs(["containerd"], "Enforcing"));
      assert.notEqual(enforcing.status, 0);
      assert.match(enforcing.stderr, /SELinux is enforcing: .*permissive/);
      const firewall = run("install_packages_dnf", stubs(["containerd"], "Permissive", true));
      assert.notEqual(firewall.status, 0);
      assert.match(firewall.stderr, /firewalld is active: .*6443.*2379-2380/);
    });
  });

  describe("the endpoint where the load balancer does not hairpin (Azure)", () => {
    it("maps the endpoint's name to 127.0.0.1 in /etc/hosts and cloud-init's templates, once", () => {
      const script = renderJoinScript(node, settings, "local-apiserver");
      writeFileSync(join(dir, "hosts"), "127.0.0.1 localhost\n");
      writeFileSync(join(dir, "hosts.debian.tmpl"), "127.0.0.1 localhost\n");
      const call = `route_endpoint_to_local_apiserver ${dir}/hosts ${dir}/hosts.*.tmpl ${dir}/absent`;
      const r = bash(`${definitionsOf(script)}\n${call}\n${call}`);
      assert.equal(r.status, 0, r.stderr);
      for (const f of ["hosts", "hosts.debian.tmpl"])
        assert.equal(
          readFileSync(join(dir, f), "utf8"),
          "127.0.0.1 localhost\n127.0.0.1 api.prod.example.com # molt: the API load balancer does not hairpin\n",
        );
    });

    it("maps before kubeadm init on the first node, after kubeadm join on the others", () => {
      const init = renderInitScript(node, settings, "local-apiserver");
      assert.ok(init.indexOf("route_endpoint_to_local_apiserver /etc/hosts") < init.indexOf("kubeadm init --config"));
      const joining = renderJoinScript(node, settings, "local-apiserver");
      const main = joining.slice(joining.indexOf("main() {"));
      assert.ok(
        main.indexOf('kubeadm join --config "$MOLT_TMP"') < main.lastIndexOf("route_endpoint_to_local_apiserver"),
      );
      for (const s of [init, joining]) assert.equal(shellcheck(s), "");
    });

    it("cannot map an address, and says so at render time", () => {
      assert.throws(
        () => renderJoinScript(node, { ...settings, controlPlaneEndpoint: "10.0.0.100:6443" }, "local-apiserver"),
        /a DNS name is needed/,
      );
      assert.match(renderJoinScript(node, settings), /readonly LOCAL_ENDPOINT_HOST=''/);
    });
  });

  describe("the network add-on", () => {
    it("applies the configured manifest after init, and none when the stack says none", () => {
      assert.match(
        renderInitScript(node, settings),
        /readonly CNI_MANIFEST='https:\/\/mirror\.example\.com\/kube-flannel\.yml'/,
      );
      assert.match(renderInitScript(node, { ...settings, cniManifest: "none" }), /readonly CNI_MANIFEST=''/);
    });
  });

  describe("feature gates kubeadm removed (EtcdLearnerMode at 1.33)", () => {
    it("drops EtcdLearnerMode from ClusterConfiguration from 1.33 on, keeps other gates", () => {
      assert.deepEqual(removedFeatureGates("1.32.4"), []);
      assert.deepEqual(removedFeatureGates("v1.33.0"), ["EtcdLearnerMode"]);
      const cc = { kubernetesVersion: "v1.32.4", featureGates: { EtcdLearnerMode: true, Other: false } };
      assert.deepEqual(clusterConfigurationAt(cc, "1.33.1"), {
        kubernetesVersion: "v1.33.1",
        featureGates: { Other: false },
      });
      assert.deepEqual(clusterConfigurationAt({ featureGates: { EtcdLearnerMode: true } }, "1.33.1"), {
        kubernetesVersion: "v1.33.1",
      });
      assert.deepEqual(clusterConfigurationAt(cc, "1.32.5").featureGates, cc.featureGates);
    });

    it("the join material step drops it too when it raises kubeadm-config to 1.33", () => {
      const config =
        "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nfeatureGates:\n  EtcdLearnerMode: " +
        "true\nkubernetesVersion: v1.32.4\nclusterName: prod\n";
      const r = raiseClusterConfiguration(config, "1.33.1");
      assert.ok(r.change);
      assert.match(r.message, /from v1\.32\.4 to v1\.33\.1, without the feature gate EtcdLearnerMode/);
      assert.deepEqual(parseYaml(r.text), {
        apiVersion: "kubeadm.k8s.io/v1beta4",
        kind: "ClusterConfiguration",
        kubernetesVersion: "v1.33.1",
        clusterName: "prod",
      });
      const kept = raiseClusterConfiguration(config, "1.32.5");
      assert.ok(kept.change);
      assert.deepEqual((parseYaml(kept.text) as { featureGates: unknown }).featureGates, { EtcdLearnerMode: true });
    });
  });

  it("every rendered variant passes shellcheck", () => {
    for (const s of [
      renderInitScript(node, settings, "local-apiserver"),
      renderJoinScript(node, { ...settings, install: { source: "image" }, imageRepository: "harbor.example.com/k8s" }),
      renderJoinMaterialScript({ joiningNode: "cp-g4-b" }),
    ])
      assert.equal(shellcheck(s), "");
  });
});
