// Fresh, short-lived join material for one joining control-plane node, made on a healthy
// control-plane node: a bootstrap token (`kubeadm token create --ttl`), a certificate key
// under which kubeadm re-uploads the control-plane certificates
// (`kubeadm init phase upload-certs --upload-certs`, which generates the key itself, so
// it is never on a command line), and the CA public-key hash that pins discovery.
// The script prints the material on the SSH channel's stdout only; the caller keeps it
// as a Pulumi secret and hands it to the join script on stdin.
import { SshSession, shellQuote, type SshTarget } from "../remote/ssh";
import { raiseClusterConfiguration } from "./cluster-config";
import { apiServerGraceFromClusterConfiguration } from "./grace";
import { renderScript } from "./script";
import * as semver from "semver";

export interface JoinMaterial {
  /** Bootstrap token "abcdef.0123456789abcdef" (secret). */
  token: string;
  /** Hex key decrypting the uploaded control-plane certificates (secret). */
  certificateKey: string;
  /** "sha256:<hex>" of the cluster CA's public key (not secret; pins discovery). */
  caCertHash: string;
  /**
   * The kube-apiserver Pod's termination grace period for kubeadm-config's API server flags
   * (grace.ts; not secret). Absent: the join script uses the one molt's settings give.
   */
  apiServerGraceSeconds?: number;
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
  return renderScript({
    title: `fresh join material for ${opts.joiningNode} (token TTL ${ttl})`,
    constants: { JOINING_NODE: opts.joiningNode, TOKEN_TTL: ttl },
    functions: [
      `admin_kubectl() {
  kubectl --kubeconfig /etc/kubernetes/admin.conf "$@"
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
  const grace = m.apiServerGraceSeconds !== undefined ? `apiServerGraceSeconds=${m.apiServerGraceSeconds}\n` : "";
  return `token=${m.token}\ncertificateKey=${m.certificateKey}\ncaCertHash=${m.caCertHash}\n${grace}`;
}

/** The part of an SSH session this module needs (infra/remote/ssh.ts SshSession fits). */
export interface CommandRunner {
  run(command: string, what: string, opts?: { stdin?: string }): Promise<string>;
}

const ADMIN_KUBECTL = "kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-system";

function bashCommand(script: string): string {
  return `bash --norc --noprofile -euo pipefail -c ${shellQuote(script)}`;
}

/** The kubeadm-config ConfigMap as JSON (its resourceVersion makes the write back conditional). */
export const READ_KUBEADM_CONFIG = bashCommand(
  [
    "if [ ! -f /etc/kubernetes/admin.conf ]; then",
    '  echo "$(hostname) is not an initialised control-plane node (no admin.conf): ask another node" >&2',
    "  exit 1",
    "fi",
    `${ADMIN_KUBECTL} get configmap kubeadm-config -o json`,
  ].join("\n"),
);

/** Replaces kubeadm-config with the JSON on stdin; a conflict (someone wrote it meanwhile) fails it. */
export const REPLACE_KUBEADM_CONFIG = bashCommand(`${ADMIN_KUBECTL} replace -f - >&2`);

/** kubeadm-config as read, and its ClusterConfiguration text. */
interface KubeadmConfigMap {
  cm: { data?: Record<string, string> };
  clusterConfiguration: string;
}

async function readKubeadmConfig(healthyNode: CommandRunner): Promise<KubeadmConfigMap> {
  const raw = await healthyNode.run(READ_KUBEADM_CONFIG, "reading kubeadm-config");
  let cm: { data?: Record<string, string> };
  try {
    cm = JSON.parse(raw) as typeof cm;
  } catch {
    throw new Error("kubectl printed no JSON for the kubeadm-config ConfigMap; nothing was changed, retry");
  }
  const cc = cm.data?.ClusterConfiguration;
  if (typeof cc !== "string")
    throw new Error("the kubeadm-config ConfigMap has no ClusterConfiguration: is this a kubeadm cluster?");
  if (/^[ \t]*EtcdLearnerMode:[ \t]*false\b/m.test(cc))
    throw new Error(
      "the cluster disables the EtcdLearnerMode feature gate: molt only joins control-plane nodes as etcd learners",
    );
  return { cm, clusterConfiguration: cc };
}

/**
 * Before a version upgrade's first new node joins, kubeadm-config must name the version
 * (kubeadm join deploys that version's static Pods). The ClusterConfiguration read over
 * SSH is rewritten here by the rule the lab's update-cluster-config uses
 * (cluster-config.ts clusterConfigurationAt: version, removed gates, etcd 3.7's flags), and
 * written back only if it changed, conditional on the resourceVersion read. Never lowered.
 * Returns the ClusterConfiguration the join will read.
 */
async function raiseKubeadmConfig(
  healthyNode: CommandRunner,
  read: KubeadmConfigMap,
  version: string,
  log: (line: string) => void = () => undefined,
): Promise<string> {
  const v = semver.parse(version.replace(/^v/, ""));
  if (!v || v.prerelease.length) throw new Error(`${JSON.stringify(version)} is not a Kubernetes release version`);
  const r = raiseClusterConfiguration(read.clusterConfiguration, v.version);
  if (!r.change) {
    if (/never lowers/.test(r.why)) log(r.why);
    return read.clusterConfiguration;
  }
  log(r.message);
  const body = { ...read.cm, data: { ...read.cm.data, ClusterConfiguration: r.text } };
  await healthyNode.run(REPLACE_KUBEADM_CONFIG, "writing kubeadm-config", { stdin: JSON.stringify(body) });
  return r.text;
}

/**
 * Runs the join-material script on a healthy control-plane node (after raising kubeadm-config
 * when asked) and returns the parsed material. Wrap the result in pulumi.secret() before it
 * enters a program or config.
 */
export async function obtainJoinMaterial(
  healthyNode: CommandRunner,
  opts: JoinMaterialOptions,
  log?: (line: string) => void,
): Promise<JoinMaterial> {
  const script = renderJoinMaterialScript(opts);
  const read = await readKubeadmConfig(healthyNode);
  const cc =
    opts.raiseClusterVersionTo !== undefined
      ? await raiseKubeadmConfig(healthyNode, read, opts.raiseClusterVersionTo, log)
      : read.clusterConfiguration;
  // kubeadm join renders the API server's manifest from kubeadm-config, not from molt's settings.
  const grace = apiServerGraceFromClusterConfiguration(cc);
  const stdout = await healthyNode.run(bashCommand(script), `join material for ${opts.joiningNode}`);
  return { ...parseJoinMaterial(stdout), apiServerGraceSeconds: grace.seconds };
}

/** Runtime of KubeadmJoinMaterial (loaded by its dynamic provider through MOLT_DIST). */
export async function createFromSeed(inputs: { seed: SshTarget; options: JoinMaterialOptions }): Promise<JoinMaterial> {
  const ssh = await SshSession.connect(inputs.seed);
  try {
    return await obtainJoinMaterial(ssh, inputs.options, (line) => void process.stderr.write(`${line}\n`));
  } finally {
    ssh.close();
  }
}
