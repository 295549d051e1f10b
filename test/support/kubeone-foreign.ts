// A foreign Kubernetes control plane made the way KubeOne's own tasks make one (read from
// kubermatic/kubeone: pkg/tasks/tasks.go WithFullInstall, pkg/templates/kubeadm/v1beta4,
// pkg/features, pkg/scripts/configs.go; docs/kubeone-clusters.md), WITHOUT molt's code path:
// machines, bastion and HAProxy from test/support/foreign.ts, then over SSH, in KubeOne's order:
//   1. the feature files on every host (encryption providers with an aescbc key, a static
//      audit policy, an AdmissionConfiguration for PodNodeSelector), uploaded 0600 into the
//      work dir and moved into place as KubeOne's scripts do;
//   2. `kubeadm init phase certs all` on the leader; its CAs and service-account keys
//      downloaded and uploaded to the followers over SSH (no --upload-certs), then `kubeadm
//      init phase certs all` on each follower;
//   3. `kubeadm init` on the leader, `kubeadm join --control-plane` on the followers one at a
//      time, with KubeOne's bootstrap token and unsafeSkipCAVerification;
//   4. what KubeOne does afterwards: the kube-controller-manager manifest patched by hand
//      (SSL_CERT_FILE), super-admin.conf removed, kube-system annotated for PodNodeSelector,
//      kubelet files chmod 0600.
// Node names are the hosts' `hostname`. Then a Secret is written, before anything else, for
// the checks: read back through each API server, its raw etcd value, the audit logs.
// Lab differences (the lab machine is not a VM): preflight is skipped (lab-kubelet is the
// kubelet and the runtime), no image pulls, KubeOne's work dir ~/kubeone is
// /etc/kubernetes/kubeone here (a lab machine's /root is the host's), and KubeOne's fixed
// 15 s sleep before each join is a wait for the API servers to be ready.
import { randomBytes } from "node:crypto";
import { parse, stringify } from "yaml";
import { attach } from "../../infra/lab/lb-impl";
import type { LabSettings } from "../../infra/lab/settings";
import { createForeignMachines, type ForeignCluster, type ForeignMachines, type ForeignNode } from "./foreign";

/** The files KubeOne's features put on every control-plane host, as KubeOne leaves them. */
export const KUBEONE_FILES = {
  encryptionConfig: "/etc/kubernetes/encryption-providers/encryption-providers.yaml",
  auditPolicy: "/etc/kubernetes/audit/policy.yaml",
  admissionConfig: "/etc/kubernetes/admission/admission-config.yaml",
  podNodeSelectorConfig: "/etc/kubernetes/admission/podnodeselector.yaml",
} as const;
/** Written by each kube-apiserver (staticAuditLog's default logPath). */
export const KUBEONE_AUDIT_LOG = "/var/log/kubernetes/audit.log";
/** The directories KubeOne mounts into kube-apiserver (apiServer.extraVolumes hostPaths). */
export const KUBEONE_VOLUME_DIRS = [
  "/etc/kubernetes/audit",
  "/var/log/kubernetes",
  "/etc/kubernetes/admission",
  "/etc/kubernetes/encryption-providers",
] as const;
/** KubeOne's work dir (~/kubeone on a VM): the kubeadm configurations it ran, with the bootstrap token. */
export const KUBEONE_WORK_DIR = "/etc/kubernetes/kubeone";
/** A namespace whose PodNodeSelector whitelist (in podnodeselector.yaml) only admits molt.dev/pool=kubeone. */
export const PNS_NAMESPACE = "kubeone-pns";

export interface KubeOneOptions {
  /** Where the nodes live; behind the bastion, an isolated bridge. */
  lab: LabSettings;
  /** The host's side of the bastion. */
  bastionLab: LabSettings;
  image: string;
  names: string[];
  clusterName: string;
  /**
   * The kubelets run with --cloud-provider=external, as on every cloud KubeOne's examples
   * cover (it deploys the CCM as an addon). lab-kubelet ignores the flag; it is there so the
   * nodes' /var/lib/kubelet/kubeadm-flags.env looks like a KubeOne cloud node's. Default true.
   */
  externalCloudProvider?: boolean;
}

/** A file or directory on a node (filesOn). */
export interface HostFile {
  path: string;
  type: "file" | "dir";
  /** Octal, e.g. "600". */
  mode: string;
  owner: string;
  size: number;
}

/** What etcd holds for a Secret: its value's first bytes and whether the plaintext shows. */
export interface SecretAtRest {
  /** Up to the end of the key name for an encrypted value ("k8s:enc:aescbc:v1:kubeone-abc123:"). */
  prefix: string;
  plaintextVisible: boolean;
}

export interface KubeOneCluster extends ForeignCluster {
  /** The host KubeOne calls the leader (the first). */
  leader: string;
  /** The Secret written right after the build (default namespace); its value stays in memory. */
  secret: { name: string; key: string };
  /** The aescbc key's name in encryption-providers.yaml (kubeone-xxxxxx). */
  encryptionKeyName: string;
  /** More machines on the nodes' bridge, with nothing of the cluster (foreign.ts addMachine). */
  addMachine(name: string, image?: string): Promise<ForeignNode>;
  /** The names of the etcd members, as `node`'s etcd lists them. */
  etcdMembers(node: string): Promise<string[]>;
  /** The names of the cluster's Node objects, read through the leader's API server. */
  nodeNames(): Promise<string[]>;
  /** Whether the node's kube-apiserver answers /readyz with 200. */
  apiServerReady(node: string): Promise<boolean>;
  /** The data of the Secret read through `node`'s API server, or the API's error. */
  readSecret(name: string, node: string): Promise<{ ok: true; matches: boolean } | { ok: false; error: string }>;
  /** The Secret's raw value in etcd, read with etcdctl on `node`. */
  secretAtRest(name: string, node: string): Promise<SecretAtRest>;
  /** The raw value starts with k8s:enc: and does not show the plaintext. */
  secretEncryptedAtRest(name: string, node?: string): Promise<boolean>;
  /** Audit events in the node's audit log (with `since`, only those received from then on). */
  auditLogEntries(node: string, since?: Date): Promise<number>;
  /** The node's audit log has at least one event (received from `since` on). */
  auditLogWritten(node: string, since?: Date): Promise<boolean>;
  /** Whether the node's API server enforces the PodNodeSelector whitelist of podnodeselector.yaml. */
  admissionConfigInEffect(node: string): Promise<boolean>;
  /** Which of `paths` exist on the node (directories are listed one level deep). */
  filesOn(node: string, paths?: readonly string[]): Promise<HostFile[]>;
  /** The last lines of the node's kube-apiserver output (lab-kubelet's log of the static pod). */
  apiServerLog(node: string, lines?: number): Promise<string>;
  /**
   * Joins a machine from addMachine the way molt joins one today and plain kubeadm would:
   * the shared PKI copied from the leader, `kubeadm join --control-plane` with a fresh token,
   * and no feature file copied by it. kubeadm waits `waitSeconds` for the kubelet's TLS bootstrap
   * (against the node's own API server) and for the control plane to start;
   * returns whether it succeeded and the last lines of its output (token lines left out).
   */
  plainControlPlaneJoin(name: string, waitSeconds?: number): Promise<{ ok: boolean; output: string }>;
}

/** kube-apiserver's admission plugins on 1.36 in KubeOne (pkg/kubeflags/data.go), plus PodNodeSelector. */
const ADMISSION_PLUGINS = [
  "CertificateApproval",
  "CertificateSigning",
  "CertificateSubjectRestriction",
  "DefaultIngressClass",
  "DefaultStorageClass",
  "DefaultTolerationSeconds",
  "LimitRanger",
  "MutatingAdmissionWebhook",
  "NamespaceLifecycle",
  "NodeRestriction",
  "PersistentVolumeClaimResize",
  "PodGroupProtection",
  "PodSecurity",
  "Priority",
  "ResourceQuota",
  "RuntimeClass",
  "ServiceAccount",
  "StorageObjectInUseProtection",
  "TaintNodesByCondition",
  "ValidatingAdmissionPolicy",
  "ValidatingAdmissionWebhook",
  "PodNodeSelector",
];
/** KubeOne's defaults (pkg/templates/kubernetesconfigs/tls.go; etcd: Go's tls.CipherSuites()). */
const APISERVER_CIPHERS = [
  "TLS_AES_128_GCM_SHA256",
  "TLS_AES_256_GCM_SHA384",
  "TLS_CHACHA20_POLY1305_SHA256",
  "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
  "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
  "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
  "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
  "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
  "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
  "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
  "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
  "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
  "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
  "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
  "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
  "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
  "TLS_RSA_WITH_AES_128_CBC_SHA",
  "TLS_RSA_WITH_AES_128_GCM_SHA256",
  "TLS_RSA_WITH_AES_256_CBC_SHA",
  "TLS_RSA_WITH_AES_256_GCM_SHA384",
  "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
];
const ETCD_CIPHERS = [
  "TLS_AES_128_GCM_SHA256",
  "TLS_AES_256_GCM_SHA384",
  "TLS_CHACHA20_POLY1305_SHA256",
  "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
  "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
  "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
  "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
  "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
  "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
  "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
  "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
  "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
  "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
];
const KUBELET_CIPHERS = [
  "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
  "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
  "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
  "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
  "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
  "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
];
/** The CAs and keys KubeOne copies from the leader to the followers (pkg/certificate/ca.go). */
const SHARED_PKI = [
  "/etc/kubernetes/pki/ca.crt",
  "/etc/kubernetes/pki/ca.key",
  "/etc/kubernetes/pki/sa.key",
  "/etc/kubernetes/pki/sa.pub",
  "/etc/kubernetes/pki/front-proxy-ca.crt",
  "/etc/kubernetes/pki/front-proxy-ca.key",
  "/etc/kubernetes/pki/etcd/ca.crt",
  "/etc/kubernetes/pki/etcd/ca.key",
];

const args = (m: Record<string, string>) =>
  Object.entries(m)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, value]) => ({ name, value }));
const hostPath = (name: string, path: string, readOnly: boolean) => ({
  name,
  hostPath: path,
  mountPath: path,
  readOnly,
  pathType: "DirectoryOrCreate",
});

/** A bootstrap token as KubeOne makes one ([a-z0-9]{6}.[a-z0-9]{16}). */
function bootstrapToken(): string {
  const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  const pick = (n: number) => [...randomBytes(n)].map((b) => alphabet[b % alphabet.length]).join("");
  return `${pick(6)}.${pick(16)}`;
}

export interface Plan {
  clusterName: string;
  endpoint: string;
  certSANs: string[];
  token: string;
  externalCloudProvider: boolean;
}

/** KubeOne's ClusterConfiguration (pkg/templates/kubeadm/v1beta4/kubeadm.go NewConfig, features on). */
export function clusterConfiguration(p: Plan, kubernetesVersion: string): Record<string, unknown> {
  return {
    apiVersion: "kubeadm.k8s.io/v1beta4",
    kind: "ClusterConfiguration",
    clusterName: p.clusterName,
    kubernetesVersion,
    controlPlaneEndpoint: p.endpoint,
    apiServer: {
      certSANs: p.certSANs,
      extraArgs: args({
        "enable-admission-plugins": ADMISSION_PLUGINS.join(","),
        "endpoint-reconciler-type": "lease",
        "kubelet-certificate-authority": "/etc/kubernetes/pki/ca.crt",
        profiling: "false",
        "request-timeout": "1m",
        "service-node-port-range": "30000-32767",
        "tls-cipher-suites": APISERVER_CIPHERS.join(","),
        // features.staticAuditLog (defaults of its config)
        "audit-policy-file": KUBEONE_FILES.auditPolicy,
        "audit-log-path": KUBEONE_AUDIT_LOG,
        "audit-log-maxage": "30",
        "audit-log-maxbackup": "3",
        "audit-log-maxsize": "100",
        // features.podNodeSelector
        "admission-control-config-file": KUBEONE_FILES.admissionConfig,
        // features.encryptionProviders
        "encryption-provider-config": KUBEONE_FILES.encryptionConfig,
      }),
      extraVolumes: [
        hostPath("audit-conf", "/etc/kubernetes/audit", true),
        hostPath("log", "/var/log/kubernetes", false),
        hostPath("admission-conf", "/etc/kubernetes/admission", true),
        hostPath("encryption-providers-conf", "/etc/kubernetes/encryption-providers", true),
      ],
    },
    controllerManager: {
      extraArgs: args({
        "flex-volume-plugin-dir": "/var/lib/kubelet/volumeplugins",
        profiling: "false",
        "terminated-pod-gc-threshold": "1000",
      }),
    },
    scheduler: { extraArgs: args({ profiling: "false" }) },
    etcd: {
      local: {
        dataDir: "/var/lib/etcd",
        extraArgs: [
          { name: "experimental-compact-hash-check-enabled", value: "true" },
          { name: "experimental-corrupt-check-time", value: "240m" },
          { name: "cipher-suites", value: ETCD_CIPHERS.join(",") },
        ],
        extraEnvs: [
          { name: "ETCDCTL_CACERT", value: "/etc/kubernetes/pki/etcd/ca.crt" },
          { name: "ETCDCTL_CERT", value: "/etc/kubernetes/pki/etcd/healthcheck-client.crt" },
          { name: "ETCDCTL_KEY", value: "/etc/kubernetes/pki/etcd/healthcheck-client.key" },
          { name: "ETCDCTL_ENDPOINTS", value: "https://127.0.0.1:2379" },
        ],
      },
    },
    networking: { podSubnet: "10.244.0.0/16", serviceSubnet: "10.96.0.0/12", dnsDomain: "cluster.local" },
  };
}

/** KubeOne's KubeletConfiguration (pkg/templates/kubernetesconfigs/kubelet.go), cluster-wide. */
const KUBELET_CONFIGURATION = {
  apiVersion: "kubelet.config.k8s.io/v1beta1",
  kind: "KubeletConfiguration",
  authentication: { anonymous: { enabled: false } },
  cgroupDriver: "systemd",
  containerLogMaxFiles: 5,
  containerLogMaxSize: "100Mi",
  readOnlyPort: 0,
  rotateCertificates: true,
  serverTLSBootstrap: true,
  tlsCipherSuites: KUBELET_CIPHERS,
};

/** KubeOne's nodeRegistration (newNodeRegistration), with the lab's runtime settings. */
function nodeRegistration(p: Plan, n: ForeignNode, hostname: string): Record<string, unknown> {
  return {
    name: hostname,
    criSocket: "unix:///run/containerd/containerd.sock",
    taints: [{ key: "node-role.kubernetes.io/control-plane", effect: "NoSchedule" }],
    kubeletExtraArgs: [
      { name: "volume-plugin-dir", value: "/var/lib/kubelet/volumeplugins" },
      ...(p.externalCloudProvider ? [{ name: "cloud-provider", value: "external" }] : []),
      { name: "node-ip", value: n.address },
      { name: "pod-max-pids", value: "-1" },
    ],
    ignorePreflightErrors: ["DirAvailable--var-lib-etcd", "DirAvailable--etc-kubernetes-manifests", "ImagePull"],
    // The lab: images are never pulled (lab-kubelet runs no containers).
    imagePullPolicy: "Never",
  };
}

/** control_plane_full_N.yaml: InitConfiguration + ClusterConfiguration + KubeletConfiguration. */
function fullConfig(p: Plan, n: ForeignNode, hostname: string, kubernetesVersion: string): string {
  const init = {
    apiVersion: "kubeadm.k8s.io/v1beta4",
    kind: "InitConfiguration",
    bootstrapTokens: [
      {
        token: p.token,
        groups: ["system:bootstrappers:kubeadm:default-node-token"],
        ttl: "1h0m0s",
        usages: ["signing", "authentication"],
      },
    ],
    localAPIEndpoint: { advertiseAddress: n.address },
    nodeRegistration: nodeRegistration(p, n, hostname),
    // The lab: no preflight (lab-kubelet stands in for the kubelet and the runtime), and no
    // kubelet-finalize (lab-kubelet keeps its client certificate where kubelet.conf says).
    skipPhases: ["preflight", "kubelet-finalize"],
  };
  return [init, clusterConfiguration(p, kubernetesVersion), KUBELET_CONFIGURATION]
    .map((d) => stringify(d))
    .join("---\n");
}

/** control_plane_N.yaml of a follower: its JoinConfiguration (newJoinConfiguration). */
function joinConfig(p: Plan, n: ForeignNode, hostname: string): string {
  return stringify({
    apiVersion: "kubeadm.k8s.io/v1beta4",
    kind: "JoinConfiguration",
    controlPlane: { localAPIEndpoint: { advertiseAddress: n.address } },
    discovery: {
      bootstrapToken: { token: p.token, apiServerEndpoint: p.endpoint, unsafeSkipCAVerification: true },
    },
    nodeRegistration: nodeRegistration(p, n, hostname),
    skipPhases: ["preflight"],
  });
}

/** The feature files, as KubeOne renders them (encryption: pkg/templates/encryptionproviders). */
export function featureFiles(keyName: string, key: string): Record<string, string> {
  return {
    "encryption-providers.yaml": stringify({
      apiVersion: "apiserver.config.k8s.io/v1",
      kind: "EncryptionConfiguration",
      resources: [
        {
          resources: ["secrets"],
          providers: [{ aescbc: { keys: [{ name: keyName, secret: key }] } }, { identity: {} }],
        },
      ],
    }),
    // staticAuditLog.config.policyFilePath: the user's policy; this one logs every request's metadata.
    "audit-policy.yaml": stringify({
      apiVersion: "audit.k8s.io/v1",
      kind: "Policy",
      omitStages: ["RequestReceived"],
      rules: [{ level: "Metadata" }],
    }),
    "admission-config.yaml": stringify({
      apiVersion: "apiserver.config.k8s.io/v1",
      kind: "AdmissionConfiguration",
      plugins: [{ name: "PodNodeSelector", path: KUBEONE_FILES.podNodeSelectorConfig }],
    }),
    // podNodeSelector.config.configFilePath: the user's plugin configuration.
    "podnodeselector.yaml": stringify({
      podNodeSelectorPluginConfig: { clusterDefaultNodeSelector: "", [PNS_NAMESPACE]: "molt.dev/pool=kubeone" },
    }),
  };
}

/** A script that writes `files` (name -> content) into the work dir's cfg/ with mode 0600. */
function uploadScript(files: Record<string, string>): string {
  const parts = Object.entries(files).map(
    ([name, content]) =>
      `base64 -d > "$CFG/${name}" <<'B64'\n${Buffer.from(content)
        .toString("base64")
        .replace(/(.{76})/g, "$1\n")}\nB64`,
  );
  return `set -euo pipefail
umask 077
CFG=${KUBEONE_WORK_DIR}/cfg
mkdir -p "$CFG"
${parts.join("\n")}
`;
}

/** KubeOne's scripts that move the uploaded files into place (pkg/scripts/configs.go). */
const INSTALL_FEATURE_FILES = `set -euo pipefail
umask 022
CFG=${KUBEONE_WORK_DIR}/cfg
mkdir -p /etc/kubernetes/audit
mv "$CFG/audit-policy.yaml" ${KUBEONE_FILES.auditPolicy}
chown root:root ${KUBEONE_FILES.auditPolicy}
mkdir -p /etc/kubernetes/admission
mv "$CFG/podnodeselector.yaml" ${KUBEONE_FILES.podNodeSelectorConfig}
chown root:root ${KUBEONE_FILES.podNodeSelectorConfig}
mv "$CFG/admission-config.yaml" ${KUBEONE_FILES.admissionConfig}
chown root:root ${KUBEONE_FILES.admissionConfig}
mkdir -p /etc/kubernetes/encryption-providers/
mv "$CFG/encryption-providers.yaml" ${KUBEONE_FILES.encryptionConfig}
chmod 600 ${KUBEONE_FILES.encryptionConfig}
chown root:root ${KUBEONE_FILES.encryptionConfig}
`;

// kubeadm's own output goes to a root-only log on the node (it would print the token).
const KUBEADM = (what: string) =>
  `kubeadm ${what} >>/var/log/molt/kubeone-kubeadm.log 2>&1 || ` +
  `{ grep -v -i token /var/log/molt/kubeone-kubeadm.log | tail -n 20 >&2; exit 1; }`;
const ETCDCTL =
  "ETCDCTL_API=3 etcdctl --endpoints=https://127.0.0.1:2379 --cacert=/etc/kubernetes/pki/etcd/ca.crt " +
  "--cert=/etc/kubernetes/pki/etcd/healthcheck-client.crt --key=/etc/kubernetes/pki/etcd/healthcheck-client.key " +
  "--command-timeout=5s";
const CHMOD_CRT = `find /etc/kubernetes/pki/ -name '*.crt' -exec chmod 600 {} \\;`;
const waitReady = (address: string) =>
  `for i in $(seq 1 600); do curl -fsS --cacert /etc/kubernetes/pki/ca.crt https://${address}:6443/readyz ` +
  `>/dev/null 2>&1 && exit 0; sleep 0.5; done; echo "kube-apiserver on ${address} not ready after 300 s" >&2; exit 1`;

/**
 * A bash function `api METHOD PATH [CONTENT-TYPE]` on a node: a request to the node's own API
 * server as admin.conf's user (with a content type, the body on stdin), printing the response
 * and then its status code on a line of its own.
 */
const apiFunction = (address: string) => `api() {
  local d; d=$(mktemp -d /run/kubeone-api.XXXXXX)
  awk '/client-certificate-data/ {print $2}' /etc/kubernetes/admin.conf | base64 -d > "$d/crt"
  awk '/client-key-data/ {print $2}' /etc/kubernetes/admin.conf | base64 -d > "$d/key"
  curl -sS --cacert /etc/kubernetes/pki/ca.crt --cert "$d/crt" --key "$d/key" -X "$1" \\
    -w '\\n%{http_code}' "https://${address}:6443$2" \${3:+-H "Content-Type: $3" --data-binary @-}
  rm -rf "$d"
}
`;

/** Builds the cluster; on any failure everything made is removed. */
export async function createKubeOneCluster(o: KubeOneOptions): Promise<KubeOneCluster> {
  const m = await createForeignMachines({
    lab: o.lab,
    bastionLab: o.bastionLab,
    image: o.image,
    names: o.names,
    clusterName: o.clusterName,
    loadBalancer: true,
  });
  try {
    return await bootstrap(m, o);
  } catch (e) {
    await m.destroy();
    throw e;
  }
}

async function bootstrap(m: ForeignMachines, o: KubeOneOptions): Promise<KubeOneCluster> {
  const lb = m.lb!;
  const ssh = m.ssh;
  const nodeOf = (name: string) => {
    const n = [...m.nodes, ...m.spares].find((x) => x.name === name);
    if (!n) throw new Error(`no node ${name}`);
    return n;
  };
  // ELB-like: every control-plane instance is in the LB from the start.
  for (const n of m.nodes) await attach({ lb: lb.inputs, server: n.name, address: n.address, port: 6443 });
  const [leader, ...followers] = m.nodes;
  // determineHostname: KubeOne names each node after the host (`hostname`, as on Azure).
  const hostnames = new Map<string, string>();
  for (const n of m.nodes) hostnames.set(n.name, (await ssh(n.name, "hostname")).trim());
  const plan: Plan = {
    clusterName: o.clusterName,
    endpoint: lb.endpoint,
    // GetCertificateSANs: the endpoint's host (+ apiserver_alternative_names: the host's side of the LB).
    certSANs: [lb.endpoint.split(":")[0], lb.hostEndpoint.split(":")[0]],
    token: bootstrapToken(),
    externalCloudProvider: o.externalCloudProvider ?? true,
  };
  const kubernetesVersion = (await ssh(leader.name, "kubeadm version -o short")).trim();
  const keyName = `kubeone-${randomBytes(3).toString("hex")}`;
  const key = randomBytes(32).toString("base64");

  // KubernetesConfigFiles: the kubeadm configurations and the feature files on every host.
  // Files are named by host ID (its index), as KubeOne names them.
  const id = (n: ForeignNode) => m.nodes.indexOf(n);
  for (const n of m.nodes) {
    const hn = hostnames.get(n.name)!;
    const cfg: Record<string, string> = {
      ...featureFiles(keyName, key),
      [`control_plane_full_${id(n)}.yaml`]: fullConfig(plan, n, hn, kubernetesVersion),
      [`control_plane_${id(n)}.yaml`]:
        n === leader ? fullConfig(plan, n, hn, kubernetesVersion) : joinConfig(plan, n, hn),
    };
    await ssh(n.name, "bash -s", uploadScript(cfg) + INSTALL_FEATURE_FILES);
  }

  // Certificates on the leader, its CAs to the followers, then each follower's own.
  const certs = (n: ForeignNode) =>
    `set -euo pipefail\nmkdir -p /var/log/molt\n` +
    KUBEADM(`init phase certs all --config ${KUBEONE_WORK_DIR}/cfg/control_plane_full_${id(n)}.yaml`) +
    `\n${CHMOD_CRT}\n`;
  await ssh(leader.name, "bash -s", certs(leader));
  const pki = await ssh(
    leader.name,
    "bash -s",
    `set -euo pipefail\nfor f in ${SHARED_PKI.join(" ")}; do echo "file $f"; base64 -w0 "$f"; echo; done\n`,
  );
  const upload = [
    "set -euo pipefail",
    "umask 077",
    ...pki
      .trim()
      .split("\n")
      .reduce<string[]>((acc, line, i, all) => {
        if (i % 2 === 0) {
          const path = line.replace(/^file /, "");
          acc.push(`mkdir -p -m 700 $(dirname ${path})`, `base64 -d > ${path} <<'B64'\n${all[i + 1]}\nB64`);
        }
        return acc;
      }, []),
    "",
  ].join("\n");
  for (const n of followers) {
    await ssh(n.name, "bash -s", upload);
    await ssh(n.name, "bash -s", certs(n));
  }

  // kubeadm init on the leader, then the followers join one at a time.
  await ssh(
    leader.name,
    "bash -s",
    `set -euo pipefail\nmkdir -p /etc/kubernetes/manifests\n` +
      KUBEADM(`init --config=${KUBEONE_WORK_DIR}/cfg/control_plane_${id(leader)}.yaml`) +
      `\n${CHMOD_CRT}\n(${waitReady(leader.address)})\n`,
  );
  for (const n of followers) {
    await ssh(
      n.name,
      "bash -s",
      `set -euo pipefail\n[[ -f /etc/kubernetes/admin.conf ]] && exit 0\nmkdir -p /etc/kubernetes/manifests\n` +
        KUBEADM(`join --config=${KUBEONE_WORK_DIR}/cfg/control_plane_${id(n)}.yaml`) +
        `\n${CHMOD_CRT}\n(${waitReady(n.address)})\n`,
    );
  }

  // WithResources: the hand-patched kube-controller-manager manifest (patchStaticPods:
  // parsed, changed and written back; no caBundle, so ca-certs stays /etc/ssl/certs),
  // super-admin.conf removed, kubelet files 0600 (fixFilePermissions).
  for (const n of m.nodes) {
    const manifest = "/etc/kubernetes/manifests/kube-controller-manager.yaml";
    const pod = parse(await ssh(n.name, `cat ${manifest}`)) as {
      spec: { containers: { env?: { name: string; value: string }[] }[] };
    };
    const c = pod.spec.containers[0];
    if (!c.env?.some((e) => e.name === "SSL_CERT_FILE"))
      c.env = [...(c.env ?? []), { name: "SSL_CERT_FILE", value: "/etc/ssl/certs/ca-certificates.crt" }];
    await ssh(
      n.name,
      "bash -s",
      `set -euo pipefail
cat > ${manifest}.tmp <<'YAML'
${stringify(pod)}YAML
chmod --reference=${manifest} ${manifest}.tmp
mv ${manifest}.tmp ${manifest}
rm -f /etc/kubernetes/super-admin.conf
chmod 600 /var/lib/kubelet/config.yaml
`,
    );
  }

  const apiOn = async (node: string, method: string, path: string, body?: unknown) => {
    const n = nodeOf(node);
    const type = method === "PATCH" ? "application/merge-patch+json" : "application/json";
    const stdin = body === undefined ? "" : JSON.stringify(body);
    const call = `api ${method} '${path}'${body === undefined ? "" : ` ${type}`}`;
    const out = await ssh(
      node,
      "bash -s",
      `set -euo pipefail\n${apiFunction(n.address)}${call} <<'JSON'\n${stdin}\nJSON\n`,
    );
    const i = out.trimEnd().lastIndexOf("\n");
    return { status: Number(out.trimEnd().slice(i + 1)), body: out.slice(0, Math.max(i, 0)) };
  };
  const must = async (what: string, r: Promise<{ status: number; body: string }>, ok: number[]) => {
    const res = await r;
    if (!ok.includes(res.status)) throw new Error(`${what}: HTTP ${res.status}: ${res.body.slice(0, 300)}`);
    return res;
  };

  // features.Activate (podNodeSelector): kube-system may run anywhere.
  await must(
    "annotating kube-system",
    apiOn(leader.name, "PATCH", "/api/v1/namespaces/kube-system", {
      metadata: { annotations: { "scheduler.alpha.kubernetes.io/node-selector": "" } },
    }),
    [200],
  );
  await must(
    `creating namespace ${PNS_NAMESPACE}`,
    apiOn(leader.name, "POST", "/api/v1/namespaces", { metadata: { name: PNS_NAMESPACE } }),
    [201, 409],
  );
  // Pods there are admitted once kube-controller-manager made its default ServiceAccount.
  const saDeadline = Date.now() + 120_000;
  while (
    (await apiOn(leader.name, "GET", `/api/v1/namespaces/${PNS_NAMESPACE}/serviceaccounts/default`)).status !== 200
  ) {
    if (Date.now() > saDeadline) throw new Error(`no default ServiceAccount in ${PNS_NAMESPACE} after 120 s`);
    await new Promise((r) => setTimeout(r, 1000));
  }

  // The Secret written before anything else.
  const secret = { name: "kubeone-canary", key: "token" };
  const secretValue = randomBytes(24).toString("hex");
  await must(
    "writing the canary Secret",
    apiOn(leader.name, "POST", "/api/v1/namespaces/default/secrets", {
      metadata: { name: secret.name },
      type: "Opaque",
      data: { [secret.key]: Buffer.from(secretValue).toString("base64") },
    }),
    [201],
  );

  const secretAtRest = async (name: string, node: string): Promise<SecretAtRest> => {
    const out = await ssh(node, "bash -s", `${ETCDCTL} get /registry/secrets/default/${name} -w json\n`);
    const kv = (JSON.parse(out) as { kvs?: { value: string }[] }).kvs?.[0];
    if (!kv) throw new Error(`etcd on ${node} has no /registry/secrets/default/${name}`);
    const raw = Buffer.from(kv.value, "base64");
    const text = raw.toString("latin1");
    // k8s:enc:<provider>:v1:<key name>: then ciphertext.
    const m5 = /^k8s:enc:[^:]+:[^:]+:[^:]+:/.exec(text);
    return {
      prefix: m5 ? m5[0] : text.slice(0, 16).replace(/[^\x20-\x7e]/g, "."),
      plaintextVisible: raw.includes(Buffer.from(secretValue)),
    };
  };
  const auditLogEntries = async (node: string, since?: Date) => {
    const out = await ssh(node, `[ -f ${KUBEONE_AUDIT_LOG} ] && tail -n 2000 ${KUBEONE_AUDIT_LOG} || true`);
    return out
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { kind?: string; requestReceivedTimestamp?: string })
      .filter((e) => e.kind === "Event")
      .filter((e) => !since || Date.parse(e.requestReceivedTimestamp ?? "") >= since.getTime()).length;
  };

  return {
    ...m,
    kubernetes: true,
    leader: leader.name,
    secret,
    encryptionKeyName: keyName,
    addMachine: m.addMachine,
    etcdMembers: async (node) => {
      const out = await ssh(node, `${ETCDCTL} member list -w json`);
      return ((JSON.parse(out) as { members?: { name?: string }[] }).members ?? []).map((x) => x.name ?? "").sort();
    },
    nodeNames: async () => {
      const r = await must("listing nodes", apiOn(leader.name, "GET", "/api/v1/nodes"), [200]);
      return (JSON.parse(r.body) as { items: { metadata: { name: string } }[] }).items
        .map((i) => i.metadata.name)
        .sort();
    },
    apiServerReady: async (node) =>
      (
        await ssh(
          node,
          `curl -s -o /dev/null -w '%{http_code}' --max-time 5 --cacert /etc/kubernetes/pki/ca.crt ` +
            `https://${nodeOf(node).address}:6443/readyz || true`,
        )
      ).trim() === "200",
    readSecret: async (name, node) => {
      const r = await apiOn(node, "GET", `/api/v1/namespaces/default/secrets/${name}`);
      if (r.status !== 200) return { ok: false, error: `HTTP ${r.status}: ${r.body.slice(0, 300)}` };
      const data = (JSON.parse(r.body) as { data?: Record<string, string> }).data ?? {};
      return { ok: true, matches: Buffer.from(data[secret.key] ?? "", "base64").toString() === secretValue };
    },
    secretAtRest,
    secretEncryptedAtRest: async (name, node = leader.name) => {
      const r = await secretAtRest(name, node);
      return r.prefix.startsWith("k8s:enc:") && !r.plaintextVisible;
    },
    auditLogEntries,
    auditLogWritten: async (node, since) => (await auditLogEntries(node, since)) > 0,
    admissionConfigInEffect: async (node) => {
      const r = await apiOn(node, "POST", `/api/v1/namespaces/${PNS_NAMESPACE}/pods?dryRun=All`, {
        metadata: { name: "pns-probe" },
        spec: { nodeSelector: { "molt.dev/pool": "other" }, containers: [{ name: "c", image: "pause" }] },
      });
      if (r.status === 403 && r.body.includes("conflict with its namespace whitelist")) return true;
      if (r.status === 201) return false;
      throw new Error(`PodNodeSelector probe on ${node}: HTTP ${r.status}: ${r.body.slice(0, 300)}`);
    },
    filesOn: async (node, paths = [...KUBEONE_VOLUME_DIRS, KUBEONE_WORK_DIR]) => {
      const out = await ssh(
        node,
        `for p in ${paths.join(" ")}; do [ -e "$p" ] && find "$p" -maxdepth 1 ` +
          `-printf '%y %m %u:%g %s %p\\n'; done; true`,
      );
      return out
        .split("\n")
        .filter(Boolean)
        .map((l) => {
          const [type, mode, owner, size, ...path] = l.split(" ");
          return { path: path.join(" "), type: type === "d" ? "dir" : "file", mode, owner, size: Number(size) };
        });
    },
    plainControlPlaneJoin: async (name, waitSeconds = 60) => {
      const n = nodeOf(name);
      const token = (await ssh(leader.name, "kubeadm token create --ttl 30m")).trim();
      const hash = (
        await ssh(
          leader.name,
          "openssl x509 -pubkey -noout -in /etc/kubernetes/pki/ca.crt | openssl pkey -pubin -outform der 2>/dev/null " +
            "| sha256sum | cut -d' ' -f1",
        )
      ).trim();
      const cfg = stringify({
        apiVersion: "kubeadm.k8s.io/v1beta4",
        kind: "JoinConfiguration",
        controlPlane: { localAPIEndpoint: { advertiseAddress: n.address } },
        discovery: {
          bootstrapToken: { token, apiServerEndpoint: plan.endpoint, caCertHashes: [`sha256:${hash}`] },
        },
        nodeRegistration: {
          name: (await ssh(name, "hostname")).trim(),
          criSocket: "unix:///run/containerd/containerd.sock",
          imagePullPolicy: "Never",
        },
        skipPhases: ["preflight"],
        timeouts: { controlPlaneComponentHealthCheck: `${waitSeconds}s`, tlsBootstrap: `${waitSeconds}s` },
      });
      await ssh(name, "bash -s", upload);
      const out = await ssh(
        name,
        "bash -s",
        `set -uo pipefail
mkdir -p /etc/kubernetes/manifests
cat > /etc/kubernetes/plain-join.yaml <<'YAML'
${cfg}YAML
kubeadm join --config /etc/kubernetes/plain-join.yaml > /var/log/molt/plain-join.log 2>&1
rc=$?
rm -f /etc/kubernetes/plain-join.yaml
echo "exit $rc"
grep -v -i token /var/log/molt/plain-join.log | tail -n 25
`,
      );
      return { ok: /^exit 0$/m.test(out), output: out };
    },
    apiServerLog: (node, lines = 20) =>
      ssh(node, `tail -n ${lines} /var/log/molt/kube-apiserver.log 2>/dev/null || true`),
  };
}
