// Files on the control-plane hosts that the cluster's ClusterConfiguration points at: the
// extraVolumes and file-valued extraArgs of the API server, controller manager and scheduler
// (KubeOne's encryption providers, audit policy, admission configuration, OIDC CA, cloud
// config). `kubeadm join --control-plane` renders the static pods with these mounts and flags
// but copies none of the files, so a new node gets them from the node it joins through.

/** One hostPath volume of a control-plane component (kubeadm's HostPathMount). */
export interface HostPathMount {
  name: string;
  hostPath: string;
  mountPath: string;
  readOnly?: boolean;
  pathType?: string;
}

/** What ClusterConfiguration says of one component: its extra flags and volumes. */
export interface ComponentRefs {
  extraArgs: Record<string, string>;
  extraVolumes: HostPathMount[];
}

export type ControlPlaneComponent = "apiServer" | "controllerManager" | "scheduler";

/** The part of kubeadm-config's ClusterConfiguration that names host files. */
export type ClusterConfigRefs = Record<ControlPlaneComponent, ComponentRefs>;

export interface HostFile {
  /** An absolute path on the host. */
  path: string;
  /**
   * `copy`: the node it joins through holds it (a file or a directory, copied with its
   * contents, owner and mode); `create`: a directory the component writes into (an audit
   * log), made empty on the new node.
   */
  action: "copy" | "create";
  /** Which field names it, for messages ("apiServer.extraVolumes encryption-providers"). */
  why: string;
}

/** Files kubeadm makes or distributes itself on every control-plane node: never carried. */
const KUBEADM_PKI = new Set(
  [
    "ca.crt",
    "ca.key",
    "sa.key",
    "sa.pub",
    "front-proxy-ca.crt",
    "front-proxy-ca.key",
    "front-proxy-client.crt",
    "front-proxy-client.key",
    "apiserver.crt",
    "apiserver.key",
    "apiserver-kubelet-client.crt",
    "apiserver-kubelet-client.key",
    "apiserver-etcd-client.crt",
    "apiserver-etcd-client.key",
    "etcd/ca.crt",
    "etcd/ca.key",
    "etcd/server.crt",
    "etcd/server.key",
    "etcd/peer.crt",
    "etcd/peer.key",
    "etcd/healthcheck-client.crt",
    "etcd/healthcheck-client.key",
  ].map((f) => `/etc/kubernetes/pki/${f}`),
);

/** The machine's own (its image's) trust stores, time zone and kubeadm's per-node kubeconfigs. */
const OWN_OF_EACH_MACHINE = [
  "/etc/ssl",
  "/etc/pki",
  "/etc/ca-certificates",
  "/usr/share/ca-certificates",
  "/usr/local/share/ca-certificates",
  "/etc/localtime",
  "/usr/share/zoneinfo",
  "/usr/libexec/kubernetes/kubelet-plugins",
  "/etc/kubernetes/admin.conf",
  "/etc/kubernetes/super-admin.conf",
  "/etc/kubernetes/controller-manager.conf",
  "/etc/kubernetes/scheduler.conf",
  "/etc/kubernetes/kubelet.conf",
];

/** Where components write (logs): made on the new node, never copied. */
const WRITTEN_BY_COMPONENTS = ["/var/log"];

/** Flags whose value is a file the component writes, not reads. */
const OUTPUT_FLAGS = new Set(["audit-log-path", "log-file", "log-dir"]);

const COMPONENTS: ControlPlaneComponent[] = ["apiServer", "controllerManager", "scheduler"];

function under(path: string, dir: string): boolean {
  return path === dir || path.startsWith(dir.endsWith("/") ? dir : `${dir}/`);
}

function normalise(path: string): string {
  const parts: string[] = [];
  for (const p of path.split("/")) {
    if (p === "" || p === ".") continue;
    if (p === "..") parts.pop();
    else parts.push(p);
  }
  return `/${parts.join("/")}`;
}

/** kubeadm's and the kubelet's own trees: a mount that holds one of them is never copied or wiped whole. */
const KUBEADM_TREES = ["/etc/kubernetes/pki", "/etc/kubernetes/manifests", "/var/lib/etcd", "/var/lib/kubelet"];

function managedElsewhere(path: string): boolean {
  // A mount as broad as /etc, /opt or /etc/kubernetes would carry (and, on a retired adopted
  // machine, wipe) far more than the cluster's files: left out, so a file inside it is not
  // carried and the join fails visibly instead.
  const broad = path.split("/").filter(Boolean).length < 2 || KUBEADM_TREES.some((t) => under(t, path));
  return broad || KUBEADM_PKI.has(path) || OWN_OF_EACH_MACHINE.some((d) => under(path, d));
}

/** Whether a flag's value is a file the component reads (the name says so and the value is absolute). */
export function isFileFlag(name: string, value: string): boolean {
  if (!value.startsWith("/") || OUTPUT_FLAGS.has(name)) return false;
  return /(^|-)(file|config|path|kubeconfig|cafile|certfile|keyfile|certificate-authority)$/.test(name);
}

/** The host path behind a path inside the component's container (its mounts, longest first). */
function hostPathOf(containerPath: string, volumes: HostPathMount[]): string | undefined {
  const byDepth = [...volumes].sort((a, b) => b.mountPath.length - a.mountPath.length);
  for (const v of byDepth) {
    const mount = normalise(v.mountPath);
    if (under(containerPath, mount)) return normalise(v.hostPath + containerPath.slice(mount.length));
  }
  // kubeadm's own mounts (pki, trust stores) keep the host's paths.
  return managedElsewhere(containerPath) || under(containerPath, "/etc/kubernetes/pki") ? containerPath : undefined;
}

/**
 * The host files a new control-plane node needs before `kubeadm join`, from what the
 * cluster's ClusterConfiguration references; sorted by path, each once (a path under a
 * carried directory is carried with it). Paths kubeadm distributes or makes itself (the
 * shared CAs and keys, per-node certificates and kubeconfigs) and each machine's own trust
 * stores are left out.
 */
export function hostFilesOf(refs: ClusterConfigRefs): HostFile[] {
  const found = new Map<string, HostFile>();
  const add = (f: HostFile) => {
    const had = found.get(f.path);
    if (!had || (had.action === "create" && f.action === "copy")) found.set(f.path, f);
  };
  for (const c of COMPONENTS) {
    const { extraArgs, extraVolumes } = refs[c];
    for (const v of extraVolumes) {
      const path = normalise(v.hostPath);
      if (managedElsewhere(path)) continue;
      const written = WRITTEN_BY_COMPONENTS.some((d) => under(path, d));
      add({ path, action: written ? "create" : "copy", why: `${c}.extraVolumes ${v.name}` });
    }
    for (const [flag, value] of Object.entries(extraArgs)) {
      if (!isFileFlag(flag, value)) continue;
      const path = hostPathOf(normalise(value), extraVolumes);
      // Not mounted: the component cannot read it from the host anyway; kubeadm's checks say so.
      if (!path || managedElsewhere(path) || WRITTEN_BY_COMPONENTS.some((d) => under(path, d))) continue;
      add({ path, action: "copy", why: `${c}.extraArgs ${flag}` });
    }
  }
  const all = [...found.values()];
  const copied = all.filter((f) => f.action === "copy").map((f) => f.path);
  return all
    .filter((f) => !copied.some((d) => d !== f.path && under(f.path, d)))
    .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/** The folder whose cluster files a retired adopted machine is wiped of; anything else may be its owner's. */
export const CLUSTER_FILES_DIR = "/etc/kubernetes";

/**
 * What of `paths` (host files the cluster names) is wiped from a retired adopted machine: each
 * path as it resolves (`..` and `.` folded), only strictly under /etc/kubernetes/; `outside`:
 * the rest, left to the owner and named in the summary.
 */
export function adoptedWipe(paths: readonly string[]): { wipe: string[]; outside: string[] } {
  const wipe: string[] = [];
  const outside: string[] = [];
  for (const p of paths) {
    const path = normalise(p);
    (path !== CLUSTER_FILES_DIR && under(path, CLUSTER_FILES_DIR) ? wipe : outside).push(path);
  }
  return { wipe, outside };
}

/** The carried files `present` (paths the node holds) lacks. */
export function missingHostFiles(files: readonly HostFile[], present: readonly string[]): HostFile[] {
  const have = new Set(present);
  return files.filter((f) => f.action === "copy" && !have.has(f.path));
}
