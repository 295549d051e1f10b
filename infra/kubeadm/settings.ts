// Typed inputs of the kubeadm bootstrap and teardown scripts, with the checks that make
// a bad value fail at render time on the operator's machine, not halfway through a node.
import * as semver from "semver";

/** Where containerd, kubelet and kubeadm come from. */
export type InstallSource =
  /** Baked into the base image: only verified (exact versions), never installed. */
  | { source: "image" }
  /**
   * Installed (or verified, when already at the version) from the distribution's package
   * manager: containerd from the distribution, kubelet/kubeadm/kubectl from the Kubernetes
   * community repositories (pkgs.k8s.io), pinned to the exact version and held.
   */
  | { source: "packages"; repository?: string };

export interface KubeadmBootstrapSettings {
  /**
   * host:port of the API load balancer: kubeadm's controlPlaneEndpoint, and where joining
   * nodes discover the cluster.
   */
  controlPlaneEndpoint: string;
  install: InstallSource;
  /** ClusterConfiguration.clusterName (default "kubernetes"). */
  clusterName?: string;
  podSubnet?: string;
  serviceSubnet?: string;
  dnsDomain?: string;
  /** Extra API server certificate SANs (the LB's DNS names and addresses). */
  apiServerCertSANs?: string[];
  /** Registry for control-plane images (default registry.k8s.io). */
  imageRepository?: string;
  /** CRI socket (default containerd's). */
  criSocket?: string;
  /**
   * Manifest applied once after `kubeadm init` (a CNI such as Calico or Cilium), so the
   * nodes of a brand-new cluster become Ready. URL or path on the node; "none" when the
   * cluster gets its network add-on another way. Stack configs must set it (molt waits
   * for Node Ready, which needs a network add-on).
   */
  cniManifest?: string;
  /**
   * "external": the kubelet runs with `--cloud-provider=external` and waits for a cloud
   * controller manager to initialise its Node (KubeOne deploys one as an addon). Absent: no
   * cloud provider (in-tree ones are gone since Kubernetes 1.31).
   */
  cloudProvider?: "external";
  /**
   * Whether `kubeadm reset` on delete removes the node's etcd member itself. Default false:
   * molt's orchestrator removes members (after drain, with a quorum check) and kubeadm's
   * unconditional removal must not race it. Set true only when nodes are deleted outside molt.
   */
  removeEtcdMemberOnReset?: boolean;
  /**
   * molt:encryptionAtRest: `kubeadm init` makes a cluster whose Secrets are encrypted in etcd
   * (aescbc, a key made on the first node); joining nodes get the file carried (host-files.ts).
   */
  encryptionAtRest?: boolean;
  /**
   * kube-apiserver's --shutdown-delay-duration (seconds; default DEFAULT_SHUTDOWN_DELAY_SECONDS):
   * on SIGTERM, /readyz fails at once while requests are still served this long, so a load
   * balancer's health check (interval x unhealthy threshold) has taken the node out before the
   * API server stops listening. molt deregisters a retiring node first; this covers the clients
   * and load balancers it does not ask.
   */
  apiServerShutdownDelaySeconds?: number;
}

/** A classic ELB's (30 s x 2, KubeOne's) and an NLB's (30 s x 2) health check at their defaults. */
export const DEFAULT_SHUTDOWN_DELAY_SECONDS = 60;

/** Values of one node, as scripts need them. */
export interface KubeadmNode {
  /** Node name: hostname, etcd member name and Kubernetes Node name. */
  name: string;
  kubernetesVersion: string;
  /** The node's private address, where its API server and etcd listen. */
  advertiseAddress: string;
  /**
   * The machine as its cloud controller manager names it (aws:///ZONE/ID, azure:///subscriptions/...,
   * vsphere://UUID): the kubelet's KubeletConfiguration.providerID, so its Node carries it from
   * registration on.
   */
  providerId?: string;
}

export const DEFAULT_CRI_SOCKET = "unix:///var/run/containerd/containerd.sock";
export const DEFAULT_PACKAGE_REPOSITORY = "https://pkgs.k8s.io/core:/stable:";
/** kubeadm joins control-plane nodes as etcd learners from here on (beta 1.29, GA 1.32). */
export const MIN_KUBERNETES_VERSION = "1.29.0";

export class InvalidBootstrapSettingError extends Error {
  constructor(
    readonly setting: string,
    message: string,
  ) {
    super(`${setting}: ${message}`);
    this.name = "InvalidBootstrapSettingError";
  }
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const HOST_PORT = /^([a-zA-Z0-9]([-a-zA-Z0-9.]*[a-zA-Z0-9])?|\[[0-9a-fA-F:.]+\]):([0-9]{1,5})$/;
const IP_ADDRESS = /^([0-9]{1,3}(\.[0-9]{1,3}){3}|[0-9a-fA-F:]+)$/;
const CIDR = /^[0-9a-fA-F:.]+\/[0-9]{1,3}(,[0-9a-fA-F:.]+\/[0-9]{1,3})?$/;
// scheme://id, as cloud controllers write Node.spec.providerID (Azure names may hold ( ) . _).
const PROVIDER_ID = /^[a-z][a-z0-9+.-]*:\/\/[A-Za-z0-9/._:()-]+$/;

export function validateNode(n: KubeadmNode): void {
  if (!DNS_LABEL.test(n.name))
    throw new InvalidBootstrapSettingError("node.name", `${JSON.stringify(n.name)} is not a DNS-1123 label`);
  kubernetesVersion(n.kubernetesVersion);
  if (!IP_ADDRESS.test(n.advertiseAddress)) {
    throw new InvalidBootstrapSettingError(
      "advertiseAddress",
      `${JSON.stringify(n.advertiseAddress)} is not an IP address`,
    );
  }
  if (n.providerId !== undefined && !PROVIDER_ID.test(n.providerId)) {
    throw new InvalidBootstrapSettingError(
      "providerId",
      `${JSON.stringify(n.providerId)} is not a provider id (scheme://id, such as aws:///eu-central-1a/i-0123...)`,
    );
  }
}

export function validateSettings(s: KubeadmBootstrapSettings): void {
  if (!HOST_PORT.test(s.controlPlaneEndpoint)) {
    throw new InvalidBootstrapSettingError(
      "controlPlaneEndpoint",
      `${JSON.stringify(s.controlPlaneEndpoint)} is not host:port`,
    );
  }
  if (s.clusterName !== undefined && !DNS_LABEL.test(s.clusterName)) {
    throw new InvalidBootstrapSettingError("clusterName", `${JSON.stringify(s.clusterName)} is not a DNS-1123 label`);
  }
  for (const [k, v] of [
    ["podSubnet", s.podSubnet],
    ["serviceSubnet", s.serviceSubnet],
  ] as const) {
    if (v !== undefined && !CIDR.test(v))
      throw new InvalidBootstrapSettingError(k, `${JSON.stringify(v)} is not a CIDR (or a dual-stack pair)`);
  }
  const delay = s.apiServerShutdownDelaySeconds;
  if (delay !== undefined && !(Number.isInteger(delay) && delay >= 0 && delay <= 600))
    throw new InvalidBootstrapSettingError(
      "apiServerShutdownDelaySeconds",
      `${JSON.stringify(delay)} is not a whole number of seconds from 0 to 600 (the load balancer's health check ` +
        "interval x unhealthy threshold)",
    );
  if (
    s.install.source === "packages" &&
    s.install.repository !== undefined &&
    !/^https:\/\/[^\s'"]+$/.test(s.install.repository)
  ) {
    throw new InvalidBootstrapSettingError("install.repository", "must be an https:// URL");
  }
}

/** The normalized version ("1.34.2"), refusing versions kubeadm cannot join as etcd learners. */
export function kubernetesVersion(v: string): semver.SemVer {
  const parsed = semver.parse(v.replace(/^v/, ""));
  if (!parsed || parsed.prerelease.length > 0) {
    throw new InvalidBootstrapSettingError(
      "kubernetesVersion",
      `${JSON.stringify(v)} is not a Kubernetes release version like 1.34.2`,
    );
  }
  if (semver.lt(parsed, MIN_KUBERNETES_VERSION)) {
    throw new InvalidBootstrapSettingError(
      "kubernetesVersion",
      `${parsed.version} is older than ${MIN_KUBERNETES_VERSION}: kubeadm joins control-plane nodes as etcd ` +
        `learners only from 1.29 on`,
    );
  }
  return parsed;
}

/** Learner mode is a feature gate before 1.32 (GA, then removed): set it only there. */
export function needsEtcdLearnerGate(v: semver.SemVer): boolean {
  return v.major === 1 && v.minor < 32;
}

/** kubeadm's config API: v1beta4 from 1.31 on, v1beta3 before. */
export function kubeadmApiVersion(v: semver.SemVer): string {
  return v.major === 1 && v.minor < 31 ? "kubeadm.k8s.io/v1beta3" : "kubeadm.k8s.io/v1beta4";
}
