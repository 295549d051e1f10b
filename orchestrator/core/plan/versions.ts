// Version rules of an upgrade: Kubernetes (kubeadm / Cluster API) and etcd's own; and the one
// parser every version rule of the plan (and molt:images) reads versions with.

/** A parsed version; `patch` is absent for a bare "MAJOR.MINOR" (an etcd cluster version, a minor key). */
export interface Version {
  major: number;
  minor: number;
  patch?: number;
}

const VERSION = /^v?(\d+)\.(\d+)(?:\.(\d+)|$)/;

/**
 * The one version parser. Surrounding whitespace and one leading "v" are ignored. Then:
 * - MAJOR.MINOR.PATCH, whatever follows it ignored: "3.7.3+k3s1", "v1.36.0-rc.1"; also
 *   "1.2.3.4" reads 1.2.3, as every parser before this one read it;
 * - MAJOR.MINOR with nothing after it: "3.7", no patch;
 * - anything else is not a version (undefined): "", "3", "x.y", "3.7x", "3.7.x", "v", "not_decided".
 */
export function versionOf(s: string | undefined): Version | undefined {
  const m = s === undefined ? null : VERSION.exec(s.trim());
  if (!m) return undefined;
  const v: Version = { major: Number(m[1]), minor: Number(m[2]) };
  if (m[3] !== undefined) v.patch = Number(m[3]);
  return v;
}

/** A version with its patch ("1.36.3"): what the rules that compare patches need; "3.7" is not one. */
export function fullVersionOf(s: string | undefined): Required<Version> | undefined {
  const v = versionOf(s);
  return v?.patch === undefined ? undefined : (v as Required<Version>);
}

/** The minor of a version ("3.7.3" and "3.7" -> 3.7), without its patch. */
export function minorOf(s: string | undefined): Version | undefined {
  const v = versionOf(s);
  return v && { major: v.major, minor: v.minor };
}

/** "3.7" */
export const minorName = (v: Version): string => `${v.major}.${v.minor}`;

/** By major and minor only: negative when a's minor is below b's. */
export const compareMinors = (a: Version, b: Version): number => a.major - b.major || a.minor - b.minor;

/** By major, minor and patch (a missing patch counts as 0: "3.7" = "3.7.0"). */
export const compareVersions = (a: Version, b: Version): number =>
  compareMinors(a, b) || (a.patch ?? 0) - (b.patch ?? 0);

/**
 * No downgrade, and no skipping a minor: every node must be at the target version or one
 * minor below it. Returns the problem, or undefined when the rollout may go on.
 */
export function kubernetesVersionProblem(
  nodes: { name: string; kubernetesVersion?: string }[],
  target: string | undefined,
): string | undefined {
  if (!target) return undefined;
  const t = fullVersionOf(target);
  if (!t) return `the target Kubernetes version "${target}" is not a version`;
  for (const n of nodes) {
    if (!n.kubernetesVersion) continue;
    const v = fullVersionOf(n.kubernetesVersion);
    if (!v) return `node ${n.name} records Kubernetes version "${n.kubernetesVersion}", which is not a version`;
    if (compareVersions(t, v) < 0)
      return (
        `${n.name} runs Kubernetes ${n.kubernetesVersion}, newer than the target ${target}: downgrades are not ` +
        `supported (etcd and the API's stored objects may already use the newer version); restore from a backup instead`
      );
    if (t.major !== v.major || t.minor - v.minor > 1)
      return (
        `${n.name} runs Kubernetes ${n.kubernetesVersion} and the target ${target} skips a minor version: ` +
        `upgrade one minor at a time (${v.major}.${v.minor + 1} first)`
      );
  }
  return undefined;
}

/**
 * etcd's own rules for a new member: it must not join a cluster whose version is above its
 * own, and may be at most one minor above it. The cluster version etcd decides is the
 * lowest server version of its members, so that is what is compared.
 */
export function etcdVersionProblem(members: string[], joining: string | undefined): string | undefined {
  if (!joining || members.length === 0) return undefined;
  const j = minorOf(joining);
  const parsed = members.map(minorOf).filter((v): v is Version => v !== undefined);
  if (!j || parsed.length === 0) return undefined;
  const cluster = parsed.reduce((a, b) => (compareMinors(a, b) <= 0 ? a : b));
  const version = minorName(cluster);
  if (compareMinors(j, cluster) < 0)
    return (
      `the new node's etcd ${joining} is older than the cluster version ${version}: an etcd member never joins ` +
      `a cluster of a newer version`
    );
  if (j.major !== cluster.major || j.minor > cluster.minor + 1)
    return (
      `the new node's etcd ${joining} is more than one minor above the cluster version ${version}: etcd ` +
      `upgrades go one minor at a time`
    );
  return undefined;
}
