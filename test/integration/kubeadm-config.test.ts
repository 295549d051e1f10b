// The kubeadm configuration molt renders, read by kubeadm itself (the lab's builds in the
// toolchain cache): strict decoding accepts it, and kubeadm's own kubelet-start phase (dry run,
// into a scratch directory) gives the kubelet `--cloud-provider=external` and writes the
// providerID the join/init script's patch carries into the kubelet's configuration.
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { renderInitScript } from "../../infra/kubeadm/init";
import { renderJoinScript } from "../../infra/kubeadm/join";
import type { KubeadmBootstrapSettings, KubeadmNode } from "../../infra/kubeadm/settings";
import { cacheDir } from "../../orchestrator/stack/engine";
import { bash, definitionsOf } from "../unit/kubeadm/shell";

const toolchain = join(cacheDir(), "toolchain");
const versions = existsSync(toolchain)
  ? readdirSync(toolchain)
      .map((d) => /^kubernetes-v(\d+\.\d+\.\d+)$/.exec(d)?.[1])
      .filter((v): v is string => !!v && existsSync(join(toolchain, `kubernetes-v${v}`, "bin", "kubeadm")))
  : [];

const settings: KubeadmBootstrapSettings = {
  controlPlaneEndpoint: "api.prod.example.com:6443",
  install: { source: "image" },
  clusterName: "prod",
  cloudProvider: "external",
};
const PROVIDER_ID = "aws:///eu-central-1a/i-0123456789abcdef0";

/** The KUBEADM_CONFIG constant of a rendered script, join placeholders filled as the script would. */
function configOf(script: string): string {
  const r = bash(`${definitionsOf(script)}\nprintf '%s' "$KUBEADM_CONFIG"`);
  assert.equal(r.status, 0, r.stderr);
  return r.stdout
    .replace("@MOLT_BOOTSTRAP_TOKEN@", "abcdef.0123456789abcdef")
    .replace("@MOLT_CERTIFICATE_KEY@", "f".repeat(64))
    .replace("@MOLT_CA_CERT_HASH@", `sha256:${"a".repeat(64)}`);
}

describe("molt's kubeadm configuration, read by kubeadm itself", function () {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), "molt-kubeadm-config-"))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("finds kubeadm builds in the toolchain cache (tools/setup.sh)", () => {
    assert.ok(versions.length > 0, `no ${toolchain}/kubernetes-v*/bin/kubeadm: run tools/setup.sh`);
  });

  for (const version of versions) {
    const kubeadm = join(toolchain, `kubernetes-v${version}`, "bin", "kubeadm");
    const node: KubeadmNode = { name: "cp-1", kubernetesVersion: version, advertiseAddress: "10.0.1.15" };
    const identified = { ...node, providerId: PROVIDER_ID };

    it(`kubeadm ${version}: strict decoding accepts init and join with the kubelet's arguments and patches`, () => {
      for (const [what, script] of [
        ["init", renderInitScript(identified, settings)],
        ["join", renderJoinScript(identified, settings)],
      ]) {
        const file = join(dir, `${what}.yaml`);
        writeFileSync(file, configOf(script));
        const r = spawnSync(kubeadm, ["config", "validate", "--config", file], { encoding: "utf8" });
        assert.equal(r.status, 0, `${what}: ${r.stderr}`);
        writeFileSync(file, configOf(script).replace("patches:", "patchez:"));
        const bad = spawnSync(kubeadm, ["config", "validate", "--config", file], { encoding: "utf8" });
        assert.match(bad.stderr, /unknown field "patchez"/, "the check is strict: it would see a wrong key");
      }
    });

    it(`kubeadm ${version}: the kubelet gets --cloud-provider=external and the script's providerID patch`, () => {
      const script = renderInitScript(identified, settings);
      const patches = join(dir, "patches");
      const write = bash(`${definitionsOf(script)}\nwrite_kubeadm_patches '${patches}' "$APISERVER_GRACE_SECONDS"`);
      assert.equal(write.status, 0, write.stderr);
      const file = join(dir, "init.yaml");
      writeFileSync(file, configOf(script).replace("/etc/kubernetes/molt-patches", patches));
      const out = join(dir, "dry-run");
      const r = spawnSync(kubeadm, ["init", "phase", "kubelet-start", "--config", file, "--dry-run"], {
        encoding: "utf8",
        env: { ...process.env, KUBEADM_INIT_DRYRUN_DIR: out },
      });
      assert.equal(r.status, 0, r.stderr + r.stdout);
      assert.match(r.stdout + r.stderr, /Applied patch of type .* to target "kubeletconfiguration"/);
      // KUBEADM_INIT_DRYRUN_DIR is where kubeadm writes what it would write to /var/lib/kubelet.
      assert.match(readFileSync(join(out, "config.yaml"), "utf8"), new RegExp(`^providerID: ${PROVIDER_ID}$`, "m"));
      assert.match(readFileSync(join(out, "kubeadm-flags.env"), "utf8"), /--cloud-provider=external/);
    });

    it(`kubeadm ${version}: the API server's manifest gets the grace period of the shutdown delay`, () => {
      // kubeadm's own manifest has none (the kubelet's 30 s): with molt's 60 s delay the API
      // server was killed halfway through it. The script's patch sets delay + 60 s + 5 s.
      const manifest = (patched: boolean) => {
        const script = renderInitScript(node, settings);
        const patches = join(dir, patched ? "patches" : "none");
        const write = bash(`${definitionsOf(script)}\nwrite_kubeadm_patches '${patches}' "$APISERVER_GRACE_SECONDS"`);
        assert.equal(write.status, 0, write.stderr);
        // Unpatched: the same directory, emptied (kubeadm refuses a patch directory that is missing).
        if (!patched) for (const f of readdirSync(patches)) rmSync(join(patches, f));
        const file = join(dir, "init.yaml");
        writeFileSync(file, configOf(script).replace("/etc/kubernetes/molt-patches", patches));
        const out = join(dir, patched ? "dry-run" : "dry-run-none");
        const r = spawnSync(kubeadm, ["init", "phase", "control-plane", "apiserver", "--config", file, "--dry-run"], {
          encoding: "utf8",
          env: { ...process.env, KUBEADM_INIT_DRYRUN_DIR: out },
        });
        assert.equal(r.status, 0, r.stderr + r.stdout);
        return readFileSync(join(out, "kube-apiserver.yaml"), "utf8");
      };
      const patched = manifest(true);
      assert.match(patched, /^ {2}terminationGracePeriodSeconds: 125$/m);
      assert.match(patched, /--shutdown-delay-duration=60s/);
      assert.doesNotMatch(manifest(false), /terminationGracePeriodSeconds/, "kubeadm's own manifest sets none");
    });
  }
});
