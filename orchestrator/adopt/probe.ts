// What a host to adopt runs, read over SSH in one read-only script: kubeadm, the etcd static
// pod, the etcd servers kube-apiserver uses, the etcd CA, and a local member listening.
import { sudoFor } from "../edges/etcd";

export interface HostFacts {
  hostname: string;
  /** kubeadm's version, when kubeadm is installed. */
  kubeadm?: string;
  /** /etc/kubernetes/manifests/etcd.yaml exists (kubeadm's stacked etcd). */
  etcdStaticPod: boolean;
  /** kube-apiserver's --etcd-servers, from its static pod manifest. */
  apiserverEtcdServers?: string;
  /** /etc/kubernetes/pki/etcd/ca.crt exists. */
  etcdPki: boolean;
  /** Something listens on 127.0.0.1:2379. */
  etcdListening: boolean;
}

export function probeScript(user: string): string {
  const sudo = sudoFor(user);
  return [
    'echo "hostname=$(hostname)"',
    'if command -v kubeadm >/dev/null 2>&1; then echo "kubeadm=$(kubeadm version -o short 2>/dev/null)"; fi',
    `${sudo}test -f /etc/kubernetes/manifests/etcd.yaml && echo etcd-static-pod=yes`,
    `${sudo}test -f /etc/kubernetes/manifests/kube-apiserver.yaml && ` +
      `echo "apiserver-etcd-servers=$(${sudo}grep -o -- '--etcd-servers=[^ "]*' ` +
      `/etc/kubernetes/manifests/kube-apiserver.yaml | head -n1 | cut -d= -f2)"`,
    `${sudo}test -f /etc/kubernetes/pki/etcd/ca.crt && echo etcd-pki=yes`,
    `ss -ltnH 'sport = :2379' 2>/dev/null | grep -qE '127\\.0\\.0\\.1:2379|\\*:2379|0\\.0\\.0\\.0:2379' && echo ` +
      `etcd-listening=yes`,
    "true",
  ].join("\n");
}

export function parseProbe(out: string): HostFacts {
  const kv = new Map(
    out
      .split("\n")
      .map((l) => l.trim())
      .filter((l) => l.includes("="))
      .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)] as const),
  );
  return {
    hostname: kv.get("hostname") ?? "",
    ...(kv.get("kubeadm") ? { kubeadm: kv.get("kubeadm")!.replace(/^v/, "") } : {}),
    etcdStaticPod: kv.get("etcd-static-pod") === "yes",
    ...(kv.get("apiserver-etcd-servers") ? { apiserverEtcdServers: kv.get("apiserver-etcd-servers")! } : {}),
    etcdPki: kv.get("etcd-pki") === "yes",
    etcdListening: kv.get("etcd-listening") === "yes",
  };
}
