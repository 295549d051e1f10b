// Fresh, short-lived join material for one joining control-plane node, made on a healthy
// control-plane node: a bootstrap token (`kubeadm token create --ttl`), a certificate key
// under which kubeadm re-uploads the control-plane certificates
// (`kubeadm init phase upload-certs --upload-certs`, which generates the key itself, so
// it is never on a command line), and the CA public-key hash that pins discovery.
// The script prints the material on the SSH channel's stdout only; the caller keeps it
// as a Pulumi secret and hands it to the join script on stdin.
import { SshSession, shellQuote, type SshTarget } from "../remote/ssh";
import { removedFeatureGates } from "./cluster-config";
import { renderScript } from "./script";
import * as semver from "semver";

export interface JoinMaterial {
  /** Bootstrap token "abcdef.0123456789abcdef" (secret). */
  token: string;
  /** Hex key decrypting the uploaded control-plane certificates (secret). */
  certificateKey: string;
  /** "sha256:<hex>" of the cluster CA's public key (not secret; pins discovery). */
  caCertHash: string;
}

export interface JoinMaterialOptions {
  /** Name of the node that will use the material (goes into the token's description). */
  joiningNode: string;
  /** Token lifetime, a Go duration (default "15m"). The certificate secret lives 2h (kubeadm's fixed TTL). */
  tokenTtl?: string;
  /**
   * Before a version upgrade's first new node joins, the cluster's kubeadm-config must
   * name the new version (kubeadm join deploys the static Pods of that version, and its
   * preflight refuses a kubelet newer than it). When set, the script raises
   * ClusterConfiguration.kubernetesVersion to this version; it never lowers it.
   */
  raiseClusterVersionTo?: string;
}

const TOKEN = /^[a-z0-9]{6}\.[a-z0-9]{16}$/;
const CERTIFICATE_KEY = /^[a-f0-9]{64}$/;
const CA_CERT_HASH = /^sha256:[a-f0-9]{64}$/;

export function renderJoinMaterialScript(opts: JoinMaterialOptions): string {
  if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(opts.joiningNode)) {
    throw new Error(`joining node name ${JSON.stringify(opts.joiningNode)} is not a DNS-1123 label`);
  }
  const ttl = opts.tokenTtl ?? "15m";
  if (!/^([0-9]+h)?([0-9]+m)?([0-9]+s)?$/.test(ttl) || ttl === "")
    throw new Error(`token TTL ${JSON.stringify(ttl)} is not a duration like 15m`);
  let raiseTo = "";
  if (opts.raiseClusterVersionTo !== undefined) {
    const v = semver.parse(opts.raiseClusterVersionTo.replace(/^v/, ""));
    if (!v || v.prerelease.length)
      throw new Error(`${JSON.stringify(opts.raiseClusterVersionTo)} is not a Kubernetes release version`);
    raiseTo = `v${v.version}`;
  }
  return renderScript({
    title: `fresh join material for ${opts.joiningNode} (token TTL ${ttl})`,
    constants: {
      JOINING_NODE: opts.joiningNode,
      TOKEN_TTL: ttl,
      RAISE_CLUSTER_VERSION_TO: raiseTo,
      // Gates the raised version's kubeadm refuses (infra/kubeadm/cluster-config.ts).
      DROP_FEATURE_GATES: raiseTo ? removedFeatureGates(raiseTo).join(" ") : "",
    },
    functions: [
      `admin_kubectl() {
  kubectl --kubeconfig /etc/kubernetes/admin.conf "$@"
}
`,
      `raise_cluster_version() {
  local config current raised
  config=$(admin_kubectl -n kube-system get configmap kubeadm-config -o 'jsonpath={.data.ClusterConfiguration}')
  current=$(sed -n 's/^kubernetesVersion: *//p' <<<"$config")
  highest=$(printf '%s\\n%s\\n' "$current" "$RAISE_CLUSTER_VERSION_TO" | sort -V | tail -n 1)
  if [ "$highest" != "$RAISE_CLUSTER_VERSION_TO" ]; then
    log "kubeadm-config names $current, newer than $RAISE_CLUSTER_VERSION_TO:" \\
      "leaving it (molt never lowers the cluster version)"
    return 0
  fi
  raised=$(awk -v version="$RAISE_CLUSTER_VERSION_TO" \\
    '/^kubernetesVersion:/ { $0 = "kubernetesVersion: " version } { print }' <<<"$config" | drop_feature_gates)
  if [ "$raised" = "$config" ]; then
    return 0
  fi
  dropped="\${DROP_FEATURE_GATES:+, without the feature gates $DROP_FEATURE_GATES (removed by then)}"
  log "raising kubeadm-config kubernetesVersion from $current to $RAISE_CLUSTER_VERSION_TO$dropped"
  printf '%s\\n' "$raised" |
    admin_kubectl -n kube-system create configmap kubeadm-config \\
      --from-file=ClusterConfiguration=/dev/stdin --dry-run=client -o yaml |
    admin_kubectl replace -f - >&2
}
`,
      // kubeadm writes featureGates as a block map; a gate line goes, and the key with it
      // when nothing is left under it.
      `drop_feature_gates() {
  awk -v drop=" $DROP_FEATURE_GATES " '
    function flush() { if (n > 0) { print header; for (i = 1; i <= n; i++) print kept[i] } n = 0; infg = 0 }
    /^featureGates:[[:space:]]*$/ { infg = 1; header = $0; n = 0; next }
    infg && /^[[:space:]]+[^[:space:]]/ {
      gate = $1; sub(/:$/, "", gate)
      if (index(drop, " " gate " ") == 0) kept[++n] = $0
      next
    }
    infg { flush() }
    { print }
    END { if (infg) flush() }
  '
}
`,
    ],
    main: `
if [ ! -f /etc/kubernetes/admin.conf ] || [ ! -f /etc/kubernetes/pki/ca.crt ]; then
  log "$(hostname) is not an initialised control-plane node (no admin.conf or CA): ask another node"
  return 1
fi
if admin_kubectl -n kube-system get configmap kubeadm-config -o 'jsonpath={.data.ClusterConfiguration}' |
  grep -Eq '^[[:space:]]*EtcdLearnerMode:[[:space:]]*false'; then
  log "the cluster disables the EtcdLearnerMode feature gate: molt only joins control-plane nodes as etcd learners"
  return 1
fi
if [ -n "$RAISE_CLUSTER_VERSION_TO" ]; then
  raise_cluster_version
fi
local token key hash
token=$(kubeadm token create --kubeconfig /etc/kubernetes/admin.conf --ttl "$TOKEN_TTL" \\
  --description "molt: join of $JOINING_NODE" --usages signing,authentication \\
  --groups system:bootstrappers:kubeadm:default-node-token)
key=$(kubeadm init phase upload-certs --upload-certs 2>/dev/null | tail -n 1)
hash=$(openssl x509 -pubkey -noout -in /etc/kubernetes/pki/ca.crt | openssl pkey -pubin -outform der |
  openssl dgst -sha256 -hex | sed 's/^.* //')
log "made a bootstrap token (TTL $TOKEN_TTL) and re-uploaded the certificates for $JOINING_NODE"
printf 'token=%s\\ncertificateKey=%s\\ncaCertHash=sha256:%s\\n' "$token" "$key" "$hash"
`,
  });
}

export class InvalidJoinMaterialError extends Error {
  constructor(what: string) {
    // Never quote the received text: it may hold the secrets.
    super(
      `join material from the healthy node is incomplete or malformed: ${what}; nothing was created, retry (or ask ` +
        `another control-plane node)`,
    );
    this.name = "InvalidJoinMaterialError";
  }
}

/** Parses and checks the join-material script's stdout. */
export function parseJoinMaterial(stdout: string): JoinMaterial {
  const fields = new Map<string, string>();
  for (const line of stdout.split("\n")) {
    const eq = line.indexOf("=");
    if (eq > 0) fields.set(line.slice(0, eq).trim(), line.slice(eq + 1).trim());
  }
  const token = fields.get("token") ?? "";
  const certificateKey = fields.get("certificateKey") ?? "";
  const caCertHash = fields.get("caCertHash") ?? "";
  if (!TOKEN.test(token)) throw new InvalidJoinMaterialError("no bootstrap token of the form [a-z0-9]{6}.[a-z0-9]{16}");
  if (!CERTIFICATE_KEY.test(certificateKey)) throw new InvalidJoinMaterialError("no 64-hex-digit certificate key");
  if (!CA_CERT_HASH.test(caCertHash)) throw new InvalidJoinMaterialError("no sha256:<hex> CA certificate hash");
  return { token, certificateKey, caCertHash };
}

/** The join script's stdin for this material. */
export function joinMaterialStdin(m: JoinMaterial): string {
  return `token=${m.token}\ncertificateKey=${m.certificateKey}\ncaCertHash=${m.caCertHash}\n`;
}

/** The part of an SSH session this module needs (infra/remote/ssh.ts SshSession fits). */
export interface CommandRunner {
  run(command: string, what: string, opts?: { stdin?: string }): Promise<string>;
}

/**
 * Runs the join-material script on a healthy control-plane node and returns the parsed
 * material. Wrap the result in pulumi.secret() before it enters a program or config.
 */
export async function obtainJoinMaterial(healthyNode: CommandRunner, opts: JoinMaterialOptions): Promise<JoinMaterial> {
  const script = renderJoinMaterialScript(opts);
  const stdout = await healthyNode.run(
    `bash --norc --noprofile -euo pipefail -c ${shellQuote(script)}`,
    `join material for ${opts.joiningNode}`,
  );
  return parseJoinMaterial(stdout);
}

/** Runtime of KubeadmJoinMaterial (loaded by its dynamic provider through MOLT_DIST). */
export async function createFromSeed(inputs: { seed: SshTarget; options: JoinMaterialOptions }): Promise<JoinMaterial> {
  const ssh = await SshSession.connect(inputs.seed);
  try {
    return await obtainJoinMaterial(ssh, inputs.options);
  } finally {
    ssh.close();
  }
}
