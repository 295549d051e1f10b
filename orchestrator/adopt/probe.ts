// What a host to adopt runs, read over SSH in one read-only script: kubeadm, the etcd static
// pod, the etcd servers kube-apiserver uses, the etcd CA, a local member listening, the
// kubelet's --cloud-provider, and on a cloud the machine's identity from its metadata service
// (what its Node's providerID is, whether or not a cloud controller set it).
import { sudoFor } from "../edges/etcd";

const EC2_INSTANCE = /^i-[0-9a-f]{8}([0-9a-f]{9})?$/;
const AWS_ZONE = /^[a-z]{2}(-[a-z]+)+-[0-9][a-z]$/;
const AZURE_VM =
  /^\/subscriptions\/[^/]+\/resourceGroups\/[^/]+\/providers\/Microsoft\.Compute\/virtualMachines\/[^/]+$/i;

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
  /** The kubelet's flags as kubeadm wrote them (/var/lib/kubelet/kubeadm-flags.env) and its extra args. */
  kubelet?: { cloudProvider?: string };
  /** The machine as its cloud controller names it (aws:///ZONE/ID, azure:///subscriptions/...), from IMDS. */
  providerId?: string;
}

// The metadata services answer at once or not at all: two seconds each.
const AWS_IDENTITY = [
  "if t=$(curl -fsS -m 2 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' " +
    "http://169.254.169.254/latest/api/token 2>/dev/null); then",
  '  echo "aws-instance-id=$(curl -fsS -m 2 -H "X-aws-ec2-metadata-token: $t" ' +
    'http://169.254.169.254/latest/meta-data/instance-id 2>/dev/null)"',
  '  echo "aws-zone=$(curl -fsS -m 2 -H "X-aws-ec2-metadata-token: $t" ' +
    'http://169.254.169.254/latest/meta-data/placement/availability-zone 2>/dev/null)"',
  "fi",
];
const AZURE_IDENTITY = [
  "echo \"azure-vm=$(curl -fsS -m 2 -H Metadata:true --noproxy '*' " +
    "'http://169.254.169.254/metadata/instance/compute/resourceId?api-version=2021-02-01&format=text' 2>/dev/null)\"",
];

/** `provider`: the stack's; a cloud's metadata service is asked for the machine's identity. */
export function probeScript(user: string, provider?: string): string {
  const sudo = sudoFor(user);
  const identity = provider === "aws" ? AWS_IDENTITY : provider === "azure" ? AZURE_IDENTITY : [];
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
    `if ${sudo}test -f /var/lib/kubelet/kubeadm-flags.env; then`,
    `  echo "kubelet-cloud-provider=$(${sudo}cat /var/lib/kubelet/kubeadm-flags.env /etc/default/kubelet ` +
      `/etc/sysconfig/kubelet 2>/dev/null | grep -o -- '--cloud-provider=[^ "]*' | head -n1 | cut -d= -f2)"`,
    "fi",
    ...identity,
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
    ...(kv.has("kubelet-cloud-provider")
      ? { kubelet: kv.get("kubelet-cloud-provider") ? { cloudProvider: kv.get("kubelet-cloud-provider") } : {} }
      : {}),
    ...providerIdOf(kv),
  };
}

function providerIdOf(kv: Map<string, string>): { providerId?: string } {
  const [id, zone, vm] = [kv.get("aws-instance-id"), kv.get("aws-zone"), kv.get("azure-vm")];
  if (id && zone && EC2_INSTANCE.test(id) && AWS_ZONE.test(zone)) return { providerId: `aws:///${zone}/${id}` };
  if (vm && AZURE_VM.test(vm)) return { providerId: `azure://${vm}` };
  return {};
}
