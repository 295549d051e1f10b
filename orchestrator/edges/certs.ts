// Certificate expiry on the nodes (molt:rollout.replaceCertificatesExpiringWithinDays), over
// the nodes' SSH sessions: kubeadm's API server, etcd and kubelet certificates, whichever a
// node has (an etcd-only lab node: the etcd ones). Read once per node and run: a node's
// certificates do not change while molt runs; a failed read is tried again next pass.
import type { NodeAccess } from "../core/edges";
import type { CertificateObservation, NodeEntry } from "../core/model";

/** kubeadm's paths (Cluster API checks the same kinds before certificatesExpiryDays). */
export const CERTIFICATE_PATHS = [
  "/etc/kubernetes/pki/apiserver.crt",
  "/etc/kubernetes/pki/apiserver-kubelet-client.crt",
  "/etc/kubernetes/pki/apiserver-etcd-client.crt",
  "/etc/kubernetes/pki/front-proxy-client.crt",
  "/etc/kubernetes/pki/etcd/server.crt",
  "/etc/kubernetes/pki/etcd/peer.crt",
  "/etc/kubernetes/pki/etcd/healthcheck-client.crt",
  "/var/lib/kubelet/pki/kubelet-client-current.pem",
  "/var/lib/kubelet/pki/kubelet.crt",
];

// One line per certificate found: "<path>\t<notAfter=...>".
const SCRIPT =
  `for f in ${CERTIFICATE_PATHS.join(" ")}; do ` +
  `[ -f "$f" ] || continue; printf '%s\\t%s\\n' "$f" "$(SUDO openssl x509 -noout -enddate -in "$f" 2>&1)"; done; true`;

export interface CertificateExpiry {
  path: string;
  notAfter: Date;
}

/** Parses the script's output: every certificate with its expiry; a line openssl refused is an error. */
export function parseCertificateExpiry(out: string): CertificateExpiry[] {
  return out
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => {
      const [path, rest = ""] = l.split("\t");
      const m = /notAfter=(.+)$/.exec(rest.trim());
      const t = m ? Date.parse(m[1]) : NaN;
      if (Number.isNaN(t)) throw new Error(`${path}: cannot read its expiry (${rest.trim() || "no output"})`);
      return { path, notAfter: new Date(t) };
    });
}

const cache = new WeakMap<NodeAccess, Map<string, CertificateExpiry[]>>();

export async function observeCertificates(
  nodes: NodeAccess,
  entries: NodeEntry[],
  withinDays: number,
  now: number,
): Promise<Record<string, CertificateObservation>> {
  const known = cache.get(nodes) ?? new Map<string, CertificateExpiry[]>();
  cache.set(nodes, known);
  const out: Record<string, CertificateObservation> = {};
  await Promise.all(
    entries.map(async (n) => {
      if (nodes.unreachable.has(n.name)) return void (out[n.name] = { ok: false, error: "unreachable over SSH" });
      try {
        let certs = known.get(n.name);
        if (!certs) {
          certs = parseCertificateExpiry(await nodes.run(n.name, SCRIPT, "certificate expiry"));
          known.set(n.name, certs);
        }
        if (certs.length === 0) return void (out[n.name] = { ok: false, error: "no certificate found" });
        const first = [...certs].sort((a, b) => a.notAfter.getTime() - b.notAfter.getTime())[0];
        out[n.name] = {
          ok: true,
          path: first.path,
          notAfter: first.notAfter.toISOString(),
          expiring: first.notAfter.getTime() - now <= withinDays * 86_400_000,
          count: certs.length,
        };
      } catch (e) {
        out[n.name] = { ok: false, error: (e as Error).message.split("\n")[0] };
      }
    }),
  );
  return out;
}
