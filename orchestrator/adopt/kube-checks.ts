// The Kubernetes checks of adoption: the API endpoint answers, kubeadm-config says stacked
// etcd, each member's Node exists; the versions each API server runs.
import type { EtcdAccess } from "../edges/etcd";
import { KubeAccess } from "../edges/kube";
import { refuseUnless, type Refuse } from "./errors";
import type { EtcdView } from "./etcd-checks";
import type { AdoptionInput } from "./input";

/** The API endpoint answers; kubeadm-config says stacked etcd; each member's Node exists; versions. */
export async function kubeChecks(
  input: AdoptionInput,
  access: EtcdAccess,
  etcd: EtcdView,
  refuse: Refuse,
): Promise<Record<string, string>> {
  if (!input.apiEndpoint) refuse("the cluster runs Kubernetes: give its API endpoint (--api-endpoint HOST:PORT)");
  const first = input.hosts[0];
  const ssh = access.session(first.address)!;
  // From a node: the endpoint is the one the nodes (and molt's new nodes) use.
  const r = await ssh.exec(
    `curl -fsS --max-time 5 --cacert /etc/kubernetes/pki/ca.crt https://${input.apiEndpoint}/readyz`,
  );
  if (r.code !== 0 || r.stdout.trim() !== "ok")
    refuse(
      `the API endpoint ${input.apiEndpoint} does not answer /readyz from ${first.address} ` +
        `(${(r.stderr || r.stdout).trim().slice(0, 200)})`,
    );
  const kube = await KubeAccess.open(access.sessions);
  try {
    const problems: string[] = [];
    const versions: Record<string, string> = {};
    for (const h of input.hosts) {
      const c = await kube.components(h.address);
      if (!c.apiserver.ok || !c.apiserver.version)
        problems.push(`kube-apiserver on ${h.address} is not ready: ${c.apiserver.error ?? "no version"}`);
      else versions[h.address] = c.apiserver.version.replace(/^v/, "");
    }
    const { core } = await kube.api(first.address);
    const cm = await core
      .readNamespacedConfigMap({ name: "kubeadm-config", namespace: "kube-system" })
      .catch(() => undefined);
    const cc = cm?.data?.ClusterConfiguration ?? "";
    if (!cc) problems.push("kube-system/kubeadm-config has no ClusterConfiguration: not a kubeadm-made cluster");
    if (/^etcd:\s*\n\s+external:/m.test(cc))
      problems.push("kubeadm-config's ClusterConfiguration names external etcd: molt manages stacked etcd only");
    const cpe = /^controlPlaneEndpoint:\s*"?([^"\s]+)"?/m.exec(cc)?.[1];
    if (cpe && cpe !== input.apiEndpoint)
      problems.push(
        `kubeadm-config's controlPlaneEndpoint is ${cpe}, not the given API endpoint ${input.apiEndpoint}: new ` +
          `nodes join through the former`,
      );
    const nodes = (await core.listNode()).items.map((n) => n.metadata?.name ?? "");
    for (const [, { member }] of etcd.byHost)
      if (!nodes.includes(member.name))
        problems.push(`etcd member ${member.name} has no Node of that name: molt matches members and Nodes by name`);
    refuseUnless(problems, refuse);
    return versions;
  } finally {
    await kube.close();
  }
}
