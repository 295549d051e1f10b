// etcd's /version endpoint, on the client port beside gRPC: the member's server version and
// the cluster version its leader decided ("etcdcluster"). The etcd3 client's Status call
// carries only the former, so the latter is read here, over the same tunnel and mutual TLS.
import { request as httpsRequest } from "node:https";
import { request as httpRequest } from "node:http";

const DEADLINE_MS = 5_000;

export interface EtcdVersions {
  /** The member's own version ("3.7.3"). */
  server: string;
  /** The cluster version ("3.6.0"), or "not_decided" right after the cluster starts. */
  cluster: string;
}

/**
 * GET /version of the member at `url` (`https://127.0.0.1:<tunnel port>`, or plain http where
 * etcd serves no TLS). `tls`: the CA its certificate is checked with, and by which name
 * (`servername`); the client certificate it asks for (kubeadm's etcd does).
 */
export function readEtcdVersion(
  url: string,
  tls?: { ca: string; cert?: string; key?: string; servername?: string },
): Promise<EtcdVersions> {
  const u = new URL("/version", url);
  return new Promise((resolve, reject) => {
    const done = (res: import("node:http").IncomingMessage) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (body += d));
      res.on("error", reject);
      res.on("end", () => {
        if (res.statusCode !== 200)
          return reject(new Error(`etcd /version answered HTTP ${res.statusCode}: ${body.trim().slice(0, 200)}`));
        try {
          const v = JSON.parse(body) as { etcdserver?: unknown; etcdcluster?: unknown };
          if (typeof v.etcdserver !== "string" || typeof v.etcdcluster !== "string") throw new Error("no versions");
          resolve({ server: v.etcdserver, cluster: v.etcdcluster });
        } catch {
          reject(new Error(`etcd /version answered what is not its versions: ${body.trim().slice(0, 200)}`));
        }
      });
    };
    const req =
      u.protocol === "https:"
        ? httpsRequest(
            u,
            {
              method: "GET",
              timeout: DEADLINE_MS,
              ...(tls ? { ca: tls.ca, cert: tls.cert, key: tls.key, servername: tls.servername } : {}),
            },
            done,
          )
        : httpRequest(u, { method: "GET", timeout: DEADLINE_MS }, done);
    req.on("timeout", () => req.destroy(new Error(`etcd /version: no answer within ${DEADLINE_MS} ms`)));
    req.on("error", reject);
    req.end();
  });
}
