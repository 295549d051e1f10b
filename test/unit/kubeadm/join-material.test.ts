import * as assert from "node:assert/strict";
import {
  InvalidJoinMaterialError,
  joinMaterialStdin,
  obtainJoinMaterial,
  parseJoinMaterial,
  renderJoinMaterialScript,
  READ_KUBEADM_CONFIG,
  REPLACE_KUBEADM_CONFIG,
  type CommandRunner,
} from "../../../infra/kubeadm/join-material";
import { clusterConfigurationAt, raiseClusterConfiguration } from "../../../infra/kubeadm/cluster-config";
import { parse as parseYaml } from "yaml";

const TOKEN = "abcdef.0123456789abcdef";
const CERT_KEY = "0123456789abcdef".repeat(4);
const CA_HASH = `sha256:${"b".repeat(64)}`;

describe("join material from a healthy control-plane node", () => {
  it("creates a short-lived token and re-uploads the certificates under a key kubeadm generates", () => {
    const script = renderJoinMaterialScript({ joiningNode: "cp-g4-b" });
    assert.match(script, /kubeadm token create --kubeconfig \/etc\/kubernetes\/admin\.conf --ttl "\$TOKEN_TTL"/);
    assert.match(script, /readonly TOKEN_TTL='15m'/);
    assert.match(script, /kubeadm init phase upload-certs --upload-certs 2>\/dev\/null \| tail -n 1/);
    assert.doesNotMatch(script, /--certificate-key/);
  });

  it("prints the material only on stdout, never through log", () => {
    const script = renderJoinMaterialScript({ joiningNode: "cp-g4-b" });
    assert.match(script, /printf 'token=%s\\ncertificateKey=%s\\ncaCertHash=sha256:%s\\n' "\$token" "\$key" "\$hash"/);
    assert.doesNotMatch(script, /log [^\n]*\$(token|key|hash)\b/);
  });

  it("refuses clusters that disabled etcd learner mode", () => {
    assert.match(renderJoinMaterialScript({ joiningNode: "cp-g4-b" }), /EtcdLearnerMode:\[\[:space:\]\]\*false/);
  });

  /** A healthy node whose kubeadm-config holds `cc`; records what molt writes back. */
  function fakeNode(cc: string) {
    const written: { ClusterConfiguration: string; resourceVersion: string }[] = [];
    const commands: string[] = [];
    const runner: CommandRunner = {
      async run(command, _what, opts) {
        commands.push(command);
        if (command === READ_KUBEADM_CONFIG)
          return JSON.stringify({
            apiVersion: "v1",
            kind: "ConfigMap",
            metadata: { name: "kubeadm-config", namespace: "kube-system", resourceVersion: "4711" },
            data: { ClusterConfiguration: cc, ClusterStatus: "kept" },
          });
        if (command === REPLACE_KUBEADM_CONFIG) {
          const body = JSON.parse(opts!.stdin!) as {
            metadata: { resourceVersion: string };
            data: { ClusterConfiguration: string; ClusterStatus: string };
          };
          assert.equal(body.data.ClusterStatus, "kept");
          written.push({
            ClusterConfiguration: body.data.ClusterConfiguration,
            resourceVersion: body.metadata.resourceVersion,
          });
          return "";
        }
        assert.match(command, /kubeadm token create/);
        return `token=${TOKEN}\ncertificateKey=${CERT_KEY}\ncaCertHash=${CA_HASH}\n`;
      },
    };
    return { runner, written, commands };
  }
  const config = (version: string, etcdArgs = "") =>
    "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\n" +
    `kubernetesVersion: ${version}\nclusterName: prod\n` +
    etcdArgs;

  it("raises kubeadm-config's kubernetesVersion before a newer node joins, and never lowers it", async () => {
    const logs: string[] = [];
    const up = fakeNode(config("v1.34.2"));
    const m = await obtainJoinMaterial(up.runner, { joiningNode: "cp-g4-b", raiseClusterVersionTo: "1.35.0" }, (l) =>
      logs.push(l),
    );
    assert.equal(m.token, TOKEN);
    assert.equal(up.written.length, 1);
    assert.equal(up.written[0].resourceVersion, "4711", "the write is conditional on what was read");
    assert.equal(
      (parseYaml(up.written[0].ClusterConfiguration) as { kubernetesVersion: string }).kubernetesVersion,
      "v1.35.0",
    );
    assert.match(logs.join("\n"), /raising kubeadm-config kubernetesVersion from v1\.34\.2 to v1\.35\.0/);
    // Raised before the material is made: the token's join reads the new version.
    assert.deepEqual(up.commands.slice(0, 2), [READ_KUBEADM_CONFIG, REPLACE_KUBEADM_CONFIG]);

    const same = fakeNode(config("v1.35.0"));
    await obtainJoinMaterial(same.runner, { joiningNode: "cp-g4-b", raiseClusterVersionTo: "1.35.0" });
    assert.equal(same.written.length, 0);
    const newer = fakeNode(config("v1.36.1"));
    const newerLogs: string[] = [];
    await obtainJoinMaterial(newer.runner, { joiningNode: "cp-g4-b", raiseClusterVersionTo: "1.35.0" }, (l) =>
      newerLogs.push(l),
    );
    assert.equal(newer.written.length, 0);
    assert.match(newerLogs.join("\n"), /molt never lowers the cluster version/);
    const plain = fakeNode(config("v1.34.2"));
    await obtainJoinMaterial(plain.runner, { joiningNode: "cp-g4-b" });
    assert.deepEqual(plain.written, []);
    assert.deepEqual(
      plain.commands.slice(0, 1),
      [READ_KUBEADM_CONFIG],
      "no version to raise: kubeadm-config is read (the API server's flags), never written",
    );
    assert.equal(plain.commands.length, 2);
  });

  it("raising to 1.37 rewrites KubeOne's etcd experimental flags, as update-cluster-config does", async () => {
    const etcd =
      "etcd:\n  local:\n    dataDir: /var/lib/etcd\n    extraArgs:\n" +
      '      - name: experimental-compact-hash-check-enabled\n        value: "true"\n' +
      "      - name: experimental-corrupt-check-time\n        value: 240m\n";
    const n = fakeNode(config("v1.36.3", etcd));
    const logs: string[] = [];
    await obtainJoinMaterial(n.runner, { joiningNode: "cp-g4-b", raiseClusterVersionTo: "1.37.2" }, (l) =>
      logs.push(l),
    );
    const written = parseYaml(n.written[0].ClusterConfiguration) as Record<string, unknown>;
    // The one rule: what the lab's path (clusterConfigurationAt) makes of the same text.
    assert.deepEqual(
      written,
      clusterConfigurationAt(parseYaml(config("v1.36.3", etcd)) as Record<string, unknown>, "1.37.2"),
    );
    assert.deepEqual((written as { etcd: { local: { extraArgs: unknown } } }).etcd.local.extraArgs, [
      { name: "corrupt-check-time", value: "240m" },
      { name: "feature-gates", value: "CompactHashCheck=true" },
    ]);
    assert.match(logs.join("\n"), /etcd's experimental flags renamed/);
    // A kubeadm-config raised to 1.37 by an older molt, flags left: fixed at the same version.
    const stale = fakeNode(config("v1.37.2", etcd));
    await obtainJoinMaterial(stale.runner, { joiningNode: "cp-g4-b", raiseClusterVersionTo: "1.37.2" });
    assert.equal(stale.written.length, 1);
    assert.doesNotMatch(stale.written[0].ClusterConfiguration, /experimental-/);
  });

  it("refuses, changing nothing: a bad version, no learner mode, a ClusterConfiguration that is not one", async () => {
    const n = fakeNode(config("v1.34.2"));
    await assert.rejects(
      obtainJoinMaterial(n.runner, { joiningNode: "cp-g4-b", raiseClusterVersionTo: "1.35.0-rc.1" }),
      /not a Kubernetes release version/,
    );
    const noLearners = fakeNode(config("v1.32.2") + "featureGates:\n  EtcdLearnerMode: false\n");
    await assert.rejects(
      obtainJoinMaterial(noLearners.runner, { joiningNode: "cp-g4-b", raiseClusterVersionTo: "1.33.0" }),
      /disables the EtcdLearnerMode feature gate/,
    );
    const garbage = fakeNode("{ not: [yaml");
    await assert.rejects(
      obtainJoinMaterial(garbage.runner, { joiningNode: "cp-g4-b", raiseClusterVersionTo: "1.35.0" }),
      /not YAML/,
    );
    for (const x of [n, noLearners, garbage]) assert.deepEqual(x.written, []);
    assert.throws(() => raiseClusterConfiguration("- a list", "1.35.0"), /not a YAML mapping/);
  });

  it("parses what the script prints", () => {
    assert.deepEqual(parseJoinMaterial(`token=${TOKEN}\ncertificateKey=${CERT_KEY}\ncaCertHash=${CA_HASH}\n`), {
      token: TOKEN,
      certificateKey: CERT_KEY,
      caCertHash: CA_HASH,
    });
  });

  it("rejects incomplete material without quoting it", () => {
    const partial = `token=${TOKEN}\ncertificateKey=\ncaCertHash=${CA_HASH}\n`;
    assert.throws(
      () => parseJoinMaterial(partial),
      (e: unknown) =>
        e instanceof InvalidJoinMaterialError && /certificate key/.test(e.message) && !e.message.includes(TOKEN),
    );
  });

  it("round-trips through the join script's stdin format", () => {
    const m = { token: TOKEN, certificateKey: CERT_KEY, caCertHash: CA_HASH };
    assert.deepEqual(parseJoinMaterial(joinMaterialStdin(m)), m);
  });

  it("runs the script on the healthy node through bash and returns the parsed material", async () => {
    const calls: string[] = [];
    const runner: CommandRunner = {
      async run(command: string) {
        calls.push(command);
        if (command === READ_KUBEADM_CONFIG)
          return JSON.stringify({ data: { ClusterConfiguration: config("v1.35.0") } });
        return `token=${TOKEN}\ncertificateKey=${CERT_KEY}\ncaCertHash=${CA_HASH}\n`;
      },
    };
    const m = await obtainJoinMaterial(runner, { joiningNode: "cp-g4-b" });
    assert.equal(m.token, TOKEN);
    assert.equal(calls.length, 2);
    assert.match(calls[1], /^bash --norc --noprofile -euo pipefail -c '/);
    assert.match(calls[1], /kubeadm token create/);
  });

  it("carries the API server's grace period for kubeadm-config's flags, not molt's settings", async () => {
    const withDelay = (args: string) => config("v1.35.0") + `apiServer:\n  extraArgs:\n${args}`;
    const seventy = fakeNode(withDelay("  - name: shutdown-delay-duration\n    value: 70s\n"));
    const m = await obtainJoinMaterial(seventy.runner, { joiningNode: "cp-g4-b", raiseClusterVersionTo: "1.35.0" });
    assert.equal(m.apiServerGraceSeconds, 70 + 60 + 5);
    assert.match(joinMaterialStdin(m), /^apiServerGraceSeconds=135$/m);
    // None named: kube-apiserver's defaults (no delay, 60 s of requests in flight).
    const none = await obtainJoinMaterial(fakeNode(config("v1.35.0")).runner, { joiningNode: "cp-g4-b" });
    assert.equal(none.apiServerGraceSeconds, 65);
    // A flag kube-apiserver would refuse: no material is made (the token is never created).
    const bad = fakeNode(withDelay("  - name: shutdown-delay-duration\n    value: soon\n"));
    await assert.rejects(obtainJoinMaterial(bad.runner, { joiningNode: "cp-g4-b" }), /shutdown-delay-duration="soon"/);
    assert.deepEqual(bad.commands, [READ_KUBEADM_CONFIG]);
  });

  it("refuses a token lifetime that is not a duration", () => {
    assert.throws(
      () => renderJoinMaterialScript({ joiningNode: "cp-g4-b", tokenTtl: "15m; reboot" }),
      /not a duration/,
    );
  });
});
