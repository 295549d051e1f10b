// kubeadm configuration documents. Secrets never appear here: the join configuration
// carries placeholders the join script fills in from stdin, in memory, just before
// writing the file (mode 0600) that kubeadm reads. Nothing secret reaches a command line.
import { stringify } from "yaml";
import type { SemVer } from "semver";
import {
  DEFAULT_CRI_SOCKET,
  DEFAULT_SHUTDOWN_DELAY_SECONDS,
  kubeadmApiVersion,
  needsEtcdLearnerGate,
  type KubeadmBootstrapSettings,
  type KubeadmNode,
} from "./settings";

export const TOKEN_PLACEHOLDER = "@MOLT_BOOTSTRAP_TOKEN@";
export const CERTIFICATE_KEY_PLACEHOLDER = "@MOLT_CERTIFICATE_KEY@";
export const CA_CERT_HASH_PLACEHOLDER = "@MOLT_CA_CERT_HASH@";

/** Lifetime of the bootstrap token `kubeadm init` creates (joins later get fresh ones). */
export const INIT_TOKEN_TTL = "15m0s";

function docs(...objects: object[]): string {
  return objects.map((o) => stringify(o, { lineWidth: 0 })).join("---\n");
}

function localApiEndpoint(node: KubeadmNode) {
  return { advertiseAddress: node.advertiseAddress, bindPort: 6443 };
}

/** Where the join and init scripts write the node's kubeadm patches (kubeadmPatchFiles). */
export const KUBEADM_PATCHES_DIR = "/etc/kubernetes/molt-patches";

function nodeRegistration(node: KubeadmNode, version: SemVer, s: KubeadmBootstrapSettings) {
  const args: Record<string, string> = s.cloudProvider ? { "cloud-provider": s.cloudProvider } : {};
  return {
    name: node.name,
    criSocket: s.criSocket ?? DEFAULT_CRI_SOCKET,
    ...(Object.keys(args).length ? { kubeletExtraArgs: extraArgs(args, version) } : {}),
  };
}

/** kubeadm's extra arguments: a map in v1beta3, a list of { name, value } from v1beta4 on. */
function extraArgs(args: Record<string, string>, version: SemVer): unknown {
  return kubeadmApiVersion(version).endsWith("v1beta3")
    ? args
    : Object.entries(args).map(([name, value]) => ({ name, value }));
}

/** kubeadm's patch of the kube-apiserver Pod (infra/kubeadm/grace.ts: its termination grace period). */
export const APISERVER_PATCH_FILE = "kube-apiserver+strategic.yaml";
export const KUBELET_PATCH_FILE = "kubeletconfiguration+merge.yaml";

/**
 * The node's own patches, as kubeadm reads them from KUBEADM_PATCHES_DIR (file name -> text):
 *   - its providerID in the kubelet's configuration (kubeadm's "kubeletconfiguration" target,
 *     1.25 on), so the Node carries it from registration on and a cloud controller manager can
 *     manage it;
 *   - the kube-apiserver Pod's terminationGracePeriodSeconds (grace.ts), so the kubelet lets
 *     the API server serve its shutdown delay and finish the requests in flight after it. A
 *     joining node's comes from the cluster's kubeadm-config at join time (join-material.ts);
 *     this is the one its settings give.
 */
export function kubeadmPatchFiles(node: KubeadmNode, apiServerGraceSeconds: number): Record<string, string> {
  return {
    ...(node.providerId ? { [KUBELET_PATCH_FILE]: stringify({ providerID: node.providerId }, { lineWidth: 0 }) } : {}),
    [APISERVER_PATCH_FILE]: apiServerPatch(apiServerGraceSeconds),
  };
}

/** The strategic-merge patch of the kube-apiserver Pod for a grace period. */
export function apiServerPatch(graceSeconds: number): string {
  return stringify({ spec: { terminationGracePeriodSeconds: graceSeconds } }, { lineWidth: 0 });
}

/** Every control-plane node molt makes has patches (at least the API server's grace period). */
const PATCHES = { patches: { directory: KUBEADM_PATCHES_DIR } };

/** Where molt's init writes the encryption configuration (the path KubeOne uses too). */
export const ENCRYPTION_DIR = "/etc/kubernetes/encryption-providers";
export const ENCRYPTION_CONFIG = `${ENCRYPTION_DIR}/encryption-providers.yaml`;

/** The API server's flags in the ClusterConfiguration (every node that joins reads them from kubeadm-config). */
function apiServerArgs(s: KubeadmBootstrapSettings): Record<string, string> {
  const delay = s.apiServerShutdownDelaySeconds ?? DEFAULT_SHUTDOWN_DELAY_SECONDS;
  return {
    ...(delay > 0 ? { "shutdown-delay-duration": `${delay}s` } : {}),
    ...(s.encryptionAtRest ? { "encryption-provider-config": ENCRYPTION_CONFIG } : {}),
  };
}

function apiServer(s: KubeadmBootstrapSettings, version: SemVer) {
  const args = apiServerArgs(s);
  return {
    ...(s.apiServerCertSANs?.length ? { certSANs: s.apiServerCertSANs } : {}),
    ...(Object.keys(args).length ? { extraArgs: extraArgs(args, version) } : {}),
    ...(s.encryptionAtRest
      ? {
          extraVolumes: [
            { name: "encryption-providers", hostPath: ENCRYPTION_DIR, mountPath: ENCRYPTION_DIR, readOnly: true },
          ],
        }
      : {}),
  };
}

export function renderInitConfiguration(node: KubeadmNode, version: SemVer, s: KubeadmBootstrapSettings): string {
  const apiVersion = kubeadmApiVersion(version);
  const cluster: Record<string, unknown> = {
    apiVersion,
    kind: "ClusterConfiguration",
    clusterName: s.clusterName ?? "kubernetes",
    kubernetesVersion: `v${version.version}`,
    controlPlaneEndpoint: s.controlPlaneEndpoint,
    networking: {
      ...(s.podSubnet ? { podSubnet: s.podSubnet } : {}),
      ...(s.serviceSubnet ? { serviceSubnet: s.serviceSubnet } : {}),
      ...(s.dnsDomain ? { dnsDomain: s.dnsDomain } : {}),
    },
    ...(s.imageRepository ? { imageRepository: s.imageRepository } : {}),
    ...(Object.keys(apiServer(s, version)).length ? { apiServer: apiServer(s, version) } : {}),
    ...(needsEtcdLearnerGate(version) ? { featureGates: { EtcdLearnerMode: true } } : {}),
  };
  return docs(
    {
      apiVersion,
      kind: "InitConfiguration",
      bootstrapTokens: [
        {
          description: "molt: created by kubeadm init; later joins use fresh tokens",
          ttl: INIT_TOKEN_TTL,
          usages: ["signing", "authentication"],
          groups: ["system:bootstrappers:kubeadm:default-node-token"],
        },
      ],
      nodeRegistration: nodeRegistration(node, version, s),
      localAPIEndpoint: localApiEndpoint(node),
      ...PATCHES,
    },
    cluster,
  );
}

export function renderJoinConfiguration(node: KubeadmNode, version: SemVer, s: KubeadmBootstrapSettings): string {
  return docs({
    apiVersion: kubeadmApiVersion(version),
    kind: "JoinConfiguration",
    discovery: {
      bootstrapToken: {
        apiServerEndpoint: s.controlPlaneEndpoint,
        token: TOKEN_PLACEHOLDER,
        caCertHashes: [CA_CERT_HASH_PLACEHOLDER],
      },
    },
    nodeRegistration: nodeRegistration(node, version, s),
    controlPlane: {
      localAPIEndpoint: localApiEndpoint(node),
      certificateKey: CERTIFICATE_KEY_PLACEHOLDER,
    },
    ...PATCHES,
  });
}
