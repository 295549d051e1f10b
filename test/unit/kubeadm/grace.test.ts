import * as assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse } from "yaml";
import { apiServerPatch, APISERVER_PATCH_FILE } from "../../../infra/kubeadm/config";
import {
  apiServerGraceFromClusterConfiguration,
  apiServerGracePeriodSeconds,
  goDurationSeconds,
} from "../../../infra/kubeadm/grace";
import { renderInitScript } from "../../../infra/kubeadm/init";
import { renderJoinScript } from "../../../infra/kubeadm/join";
import type { KubeadmBootstrapSettings, KubeadmNode } from "../../../infra/kubeadm/settings";
import { bash, definitionsOf } from "./shell";

const node: KubeadmNode = { name: "cp-1", kubernetesVersion: "1.36.3", advertiseAddress: "10.0.1.15" };
const settings: KubeadmBootstrapSettings = {
  controlPlaneEndpoint: "api.example.com:6443",
  install: { source: "image" },
};

describe("the API server's termination grace period (kubeadm patch)", () => {
  it("covers the shutdown delay and the requests in flight after it", () => {
    for (const [delay, timeout, grace] of [
      [60, undefined, 125],
      [0, undefined, 65],
      [4, undefined, 69],
      [600, undefined, 665],
      [70, 120, 195],
      [0.5, 60, 66],
    ] as const)
      assert.equal(apiServerGracePeriodSeconds(delay, timeout), grace, `delay ${delay}, timeout ${timeout}`);
  });

  it("reads Go durations as kube-apiserver does, and nothing else", () => {
    for (const [text, seconds] of [
      ["60s", 60],
      ["1m30s", 90],
      ["1h", 3600],
      ["1.5m", 90],
      ["500ms", 0.5],
      ["0", 0],
      ["0s", 0],
      [" 70s ", 70],
    ] as const)
      assert.equal(goDurationSeconds(text), seconds, text);
    for (const text of ["", "60", "1m 30s", "-5s", "5 s", "1d", "s", "60s;", "sixty"])
      assert.equal(goDurationSeconds(text), undefined, JSON.stringify(text));
  });

  it("takes kubeadm-config's flags in either form, the last of a repeated one, and defaults", () => {
    const v1beta4 =
      "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\napiServer:\n  extraArgs:\n" +
      "  - name: shutdown-delay-duration\n    value: 30s\n  - name: request-timeout\n    value: 2m\n" +
      "  - name: shutdown-delay-duration\n    value: 70s\n";
    assert.deepEqual(apiServerGraceFromClusterConfiguration(v1beta4), {
      seconds: 70 + 120 + 5,
      shutdownDelaySeconds: 70,
      requestTimeoutSeconds: 120,
    });
    const v1beta3 =
      "apiVersion: kubeadm.k8s.io/v1beta3\nkind: ClusterConfiguration\napiServer:\n  extraArgs:\n" +
      "    shutdown-delay-duration: 60s\n";
    assert.equal(apiServerGraceFromClusterConfiguration(v1beta3).seconds, 125);
    assert.equal(apiServerGraceFromClusterConfiguration("kind: ClusterConfiguration\n").seconds, 65);
    assert.equal(apiServerGraceFromClusterConfiguration("kind: ClusterConfiguration\napiServer: {}\n").seconds, 65);
  });

  it("refuses flags kube-apiserver would refuse, and text that is not YAML, naming what is wrong", () => {
    assert.throws(
      () =>
        apiServerGraceFromClusterConfiguration(
          "apiServer:\n  extraArgs:\n  - name: request-timeout\n    value: forever\n",
        ),
      /apiServer\.extraArgs has request-timeout="forever", not a duration/,
    );
    assert.throws(() => apiServerGraceFromClusterConfiguration("apiServer: [\n"), /ClusterConfiguration is not YAML/);
  });

  describe("in the init and join scripts", () => {
    let dir: string;
    beforeEach(() => (dir = mkdtempSync(join(tmpdir(), "molt-grace-"))));
    afterEach(() => rmSync(dir, { recursive: true, force: true }));
    const patchOf = () => parse(readFileSync(join(dir, APISERVER_PATCH_FILE), "utf8")) as unknown;

    it("init: the grace period of molt's shutdown delay (default 60 s, or the setting)", () => {
      for (const [s, grace] of [
        [settings, 125],
        [{ ...settings, apiServerShutdownDelaySeconds: 0 }, 65],
        [{ ...settings, apiServerShutdownDelaySeconds: 90 }, 155],
      ] as const) {
        const r = bash(
          `${definitionsOf(renderInitScript(node, s))}\nwrite_kubeadm_patches '${dir}' "$APISERVER_GRACE_SECONDS"`,
        );
        assert.equal(r.status, 0, r.stderr);
        assert.deepEqual(patchOf(), parse(apiServerPatch(grace)));
        assert.deepEqual(patchOf(), { spec: { terminationGracePeriodSeconds: grace } });
      }
    });

    it("join: the grace period its material carries (kubeadm-config's), else the settings'", () => {
      const script = renderJoinScript(node, settings);
      const main = script.slice(script.indexOf("main() {"));
      const call = /^\s*write_kubeadm_patches .*$/m.exec(main)![0].trim().replace('"$KUBEADM_PATCHES_DIR"', `'${dir}'`);
      const material = "token=abcdef.0123456789abcdef\ncertificateKey=" + "f".repeat(64) + "\ncaCertHash=sha256:x\n";
      for (const [stdin, grace] of [
        [`${material}apiServerGraceSeconds=195\n`, 195],
        [material, 125],
      ] as const) {
        const r = bash(`${definitionsOf(script)}\nread_join_material\n${call}`, stdin);
        assert.equal(r.status, 0, r.stderr);
        assert.deepEqual(patchOf(), { spec: { terminationGracePeriodSeconds: grace } });
        assert.match(r.stderr, new RegExp(`the API server's termination grace period: ${grace} s`));
      }
    });

    it("refuses a grace period that is not a whole number of seconds, writing nothing", () => {
      const defs = definitionsOf(renderJoinScript(node, settings));
      for (const bad of ["", "0", "-5", "12.5", "abc", "125; touch /tmp/x", "1000000"]) {
        const r = bash(`${defs}\nwrite_kubeadm_patches '${dir}/p' '${bad.replace(/'/g, "")}'`);
        assert.notEqual(r.status, 0, JSON.stringify(bad));
        assert.match(r.stderr, /is not a whole number of seconds from 1 to 99999/);
        assert.deepEqual(readdirSync(dir), [], `nothing written for ${JSON.stringify(bad)}`);
      }
    });
  });
});
