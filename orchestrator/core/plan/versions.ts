// Version rules of an upgrade: Kubernetes (kubeadm / Cluster API) and etcd's own.

const semverParts = (v: string): [number, number, number] | undefined => {
  const m = /^v?(\d+)\.(\d+)\.(\d+)/.exec(v);
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : undefined;
};

/**
 * No downgrade, and no skipping a minor: every node must be at the target version or one
 * minor below it. Returns the problem, or undefined when the rollout may go on.
 */
export function kubernetesVersionProblem(
  nodes: { name: string; kubernetesVersion?: string }[],
  target: string | undefined,
): string | undefined {
  if (!target) return undefined;
  const t = semverParts(target);
  if (!t) return `the target Kubernetes version "${target}" is not a version`;
  for (const n of nodes) {
    if (!n.kubernetesVersion) continue;
    const v = semverParts(n.kubernetesVersion);
    if (!v) return `node ${n.name} records Kubernetes version "${n.kubernetesVersion}", which is not a version`;
    const cmp = t[0] - v[0] || t[1] - v[1] || t[2] - v[2];
    if (cmp < 0)
      return (
        `${n.name} runs Kubernetes ${n.kubernetesVersion}, newer than the target ${target}: downgrades are not ` +
        `supported (etcd and the API's stored objects may already use the newer version); restore from a backup instead`
      );
    if (t[0] !== v[0] || t[1] - v[1] > 1)
      return (
        `${n.name} runs Kubernetes ${n.kubernetesVersion} and the target ${target} skips a minor version: ` +
        `upgrade one minor at a time (${v[0]}.${v[1] + 1} first)`
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
  const j = semverParts(joining);
  const parsed = members.map(semverParts).filter((v): v is [number, number, number] => v !== undefined);
  if (!j || parsed.length === 0) return undefined;
  const byMinor = (a: [number, number, number], b: [number, number, number]) => a[0] - b[0] || a[1] - b[1];
  const cluster = parsed.reduce((a, b) => (byMinor(a, b) <= 0 ? a : b));
  const version = `${cluster[0]}.${cluster[1]}`;
  if (byMinor(j, cluster) < 0)
    return (
      `the new node's etcd ${joining} is older than the cluster version ${version}: an etcd member never joins ` +
      `a cluster of a newer version`
    );
  if (j[0] !== cluster[0] || j[1] > cluster[1] + 1)
    return (
      `the new node's etcd ${joining} is more than one minor above the cluster version ${version}: etcd ` +
      `upgrades go one minor at a time`
    );
  return undefined;
}
