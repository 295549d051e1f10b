import * as assert from "node:assert/strict";
import {
  InvalidJoinMaterialError,
  joinMaterialStdin,
  obtainJoinMaterial,
  parseJoinMaterial,
  renderJoinMaterialScript,
  type CommandRunner,
} from "../../../infra/kubeadm/join-material";
import { bash, definitionsOf } from "./shell";

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

  it("raises kubeadm-config's kubernetesVersion before a newer node joins, and never lowers it", () => {
    const script = renderJoinMaterialScript({ joiningNode: "cp-g4-b", raiseClusterVersionTo: "1.35.0" });
    const fakeKubectl = (current: string) =>
      `admin_kubectl() {
  case "$*" in
    *"get configmap"*)
      printf 'apiVersion: kubeadm.k8s.io/v1beta4\\nkind: ClusterConfiguration\\n'
      printf 'kubernetesVersion: %s\\nclusterName: prod\\n' '${current}' ;;
    *"create configmap"*) cat >/dev/null; echo replaced-with ;;
    *replace*) cat ;;
  esac
}`;
    const run = (current: string) => bash(`${definitionsOf(script)}\n${fakeKubectl(current)}\nraise_cluster_version`);
    const up = run("v1.34.2");
    assert.equal(up.status, 0, up.stderr);
    assert.match(up.stderr, /raising kubeadm-config kubernetesVersion from v1\.34\.2 to v1\.35\.0/);
    const same = run("v1.35.0");
    assert.equal(same.stderr, "");
    const newer = run("v1.36.1");
    assert.match(newer.stderr, /molt never lowers the cluster version/);
    assert.doesNotMatch(newer.stderr, /raising/);
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
        return `token=${TOKEN}\ncertificateKey=${CERT_KEY}\ncaCertHash=${CA_HASH}\n`;
      },
    };
    const m = await obtainJoinMaterial(runner, { joiningNode: "cp-g4-b" });
    assert.equal(m.token, TOKEN);
    assert.equal(calls.length, 1);
    assert.match(calls[0], /^bash --norc --noprofile -euo pipefail -c '/);
    assert.match(calls[0], /kubeadm token create/);
  });

  it("refuses a token lifetime that is not a duration", () => {
    assert.throws(
      () => renderJoinMaterialScript({ joiningNode: "cp-g4-b", tokenTtl: "15m; reboot" }),
      /not a duration/,
    );
  });
});
