// Plain helpers of the Kubernetes edge: HTTPS probes with a deadline, versions in image
// tags, and the admin credentials in a kubeconfig.
import { request, type Agent } from "node:https";
import { parse as parseYaml } from "yaml";
import type { TlsClientCredentials } from "./etcd";

type K8s = typeof import("@kubernetes/client-node");
let k8sModule: Promise<K8s> | undefined;
/** @kubernetes/client-node is an ES module; molt is CommonJS. */
export function k8s(): Promise<K8s> {
  k8sModule ??= import("@kubernetes/client-node");
  return k8sModule;
}

export const CALL_DEADLINE_MS = 5_000;

/**
 * How long one Kubernetes API call may take: kube-apiserver's own default request timeout
 * (--request-timeout, 1 min), by which a working server has answered or ended the request.
 * client-node sets none, and a kept-alive agent's timeout ends only idle connections, so a
 * server that stopped answering on a working tunnel held the pass that asked it forever.
 */
export const API_CALL_DEADLINE_MS = 60_000;

/**
 * API clients for the API server at `server`, over `agent`'s connections (the agent holds the
 * TLS credentials: the CA, the client certificate and key, the server name). client-node's
 * KubeConfig makes a new agent, so a new connection and TLS handshake, for every call; with a
 * kept-alive agent the calls share their connections. Each call is cut off after `deadlineMs`.
 */
export function apiClientsOver(m: K8s, server: string, agent: Agent, deadlineMs = API_CALL_DEADLINE_MS) {
  const config = m.createConfiguration({
    baseServer: new m.ServerConfiguration<Record<string, string>>(server, {}),
    authMethods: {
      default: {
        getName: () => "tls-client-certificate",
        applySecurityAuthentication: (context) => {
          context.setAgent(agent);
          context.setSignal(AbortSignal.timeout(deadlineMs));
        },
      },
    },
  });
  const timed = <A extends object>(api: A): A => withCallTimeouts(api, server, deadlineMs);
  return {
    core: timed(new m.CoreV1Api(config)),
    apps: timed(new m.AppsV1Api(config)),
    coord: timed(new m.CoordinationV1Api(config)),
    policy: timed(new m.PolicyV1Api(config)),
  };
}

/** A Kubernetes API call that got no answer within its deadline. */
export class KubeCallTimeoutError extends Error {
  constructor(call: string, server: string, deadlineMs: number) {
    super(`the API server at ${server} did not answer ${call} within ${deadlineMs / 1000} s`);
    this.name = "KubeCallTimeoutError";
  }
}

/**
 * The API's methods with the deadline's abort reported as what it is. node-fetch rejects an
 * aborted request with an "AbortError" ("The user aborted a request."), which molt's acts
 * read as the run being cancelled; these calls are given no other signal than their deadline,
 * so an abort here is always a call that timed out.
 */
function withCallTimeouts<A extends object>(api: A, server: string, deadlineMs: number): A {
  return new Proxy(api, {
    get(target, key, receiver) {
      const v = Reflect.get(target, key, receiver) as unknown;
      if (typeof v !== "function") return v;
      return (...args: unknown[]) => {
        const r = (v as (...a: unknown[]) => unknown).apply(target, args);
        return r instanceof Promise
          ? r.catch((e: unknown) => {
              throw (e as Error)?.name === "AbortError" ? new KubeCallTimeoutError(String(key), server, deadlineMs) : e;
            })
          : r;
      };
    },
  });
}

/**
 * One HTTPS GET with a deadline; resolves with status and body, never rejects. Through
 * `agent` (kept-alive connections), a connection the server closed while it sat idle is
 * tried once more on a new one: the request never reached the server.
 */
export function get(
  port: number,
  path: string,
  tls: { ca?: string; servername?: string; insecure?: boolean },
  agent?: Agent,
): Promise<{ status: number; body: string; error?: string }> {
  const once = (): Promise<{ status: number; body: string; error?: string; stale?: boolean }> =>
    new Promise((resolve) => {
      const req = request(
        {
          host: "127.0.0.1",
          port,
          path,
          method: "GET",
          timeout: CALL_DEADLINE_MS,
          ...(agent ? { agent } : {}),
          ...(tls.insecure ? { rejectUnauthorized: false } : { ca: tls.ca, servername: tls.servername }),
        },
        (res) => {
          let body = "";
          res.setEncoding("utf8");
          res.on("data", (d: string) => (body += d));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
          res.on("error", (e) => resolve({ status: 0, body, error: e.message }));
        },
      );
      req.on("timeout", () => req.destroy(new Error(`no answer within ${CALL_DEADLINE_MS} ms`)));
      req.on("error", (e) =>
        resolve({ status: 0, body: "", error: e.message, stale: req.reusedSocket && staleSocket(e) }),
      );
      req.end();
    });
  return once().then(({ stale, ...r }) => (stale ? once().then(({ stale: _, ...again }) => again) : r));
}

/** The errors of a kept-alive connection the other end had closed before the request went out. */
function staleSocket(e: Error): boolean {
  const code = (e as NodeJS.ErrnoException).code;
  return code === "ECONNRESET" || code === "EPIPE" || /socket hang up/.test(e.message);
}

export function describe(r: { status: number; body: string; error?: string }): string {
  return r.error ?? `HTTP ${r.status}: ${r.body.trim().split("\n").slice(-3).join(" ").slice(0, 200)}`;
}

export function stripV(v: string): string {
  return v.replace(/^v/, "");
}

/** The version in an image reference's tag (registry.k8s.io/kube-proxy:v1.36.3 -> 1.36.3). */
export function tagVersion(image: string): string {
  const ref = image.split("@")[0];
  const name = ref.slice(ref.lastIndexOf("/") + 1);
  return stripV(name.includes(":") ? name.slice(name.lastIndexOf(":") + 1) : "");
}

export function notFound(e: unknown): undefined {
  if ((e as { code?: number }).code === 404) return undefined;
  throw e;
}

export function evictionMessage(e: unknown): string {
  const body = (e as { body?: unknown }).body;
  try {
    const parsed = (typeof body === "string" ? JSON.parse(body) : body) as {
      message?: string;
      details?: { causes?: { message?: string }[] };
    };
    return (
      [parsed.message, ...(parsed.details?.causes ?? []).map((c) => c.message)].filter(Boolean).join("; ") ||
      "too many requests"
    );
  } catch {
    return String(body ?? (e as Error).message).slice(0, 300);
  }
}

/** The client certificate and key (and CA) of a kubeconfig with embedded data. */
export function credentialsOf(kubeconfig: string): TlsClientCredentials | undefined {
  let doc: {
    clusters?: { cluster?: { "certificate-authority-data"?: string } }[];
    users?: { user?: { "client-certificate-data"?: string; "client-key-data"?: string } }[];
  } | null;
  try {
    doc = parseYaml(kubeconfig) as typeof doc;
  } catch {
    return undefined;
  }
  const ca = doc?.clusters?.[0]?.cluster?.["certificate-authority-data"];
  const cert = doc?.users?.[0]?.user?.["client-certificate-data"];
  const key = doc?.users?.[0]?.user?.["client-key-data"];
  if (!ca || !cert || !key) return undefined;
  const d = (s: string) => Buffer.from(s, "base64").toString("utf8");
  return { ca: d(ca), cert: d(cert), key: d(key) };
}

/** The leader-election Leases of the control-plane components kubeadm runs on each node. */
export const LEADER_LEASES = ["kube-controller-manager", "kube-scheduler"] as const;

export interface LeaseSpecLike {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: Date;
  renewTime?: Date;
  leaseTransitions?: number;
  /** Set when coordinated leader election manages the Lease (CoordinatedLeaderElection). */
  strategy?: string;
  preferredHolder?: string;
}

/**
 * The spec that hands a leader Lease on when `node`'s component held it and has stopped, or
 * undefined when another holds it. It is what client-go's leader election writes when it
 * releases a lease itself (ReleaseOnCancel: no holder, a 1 s duration), so a candidate on
 * another node takes it at its next retry instead of after the lease's full duration.
 * kube-controller-manager does not release its own lease on exit (an alpha feature gate
 * in 1.36), and no component can once its API server is gone. A component's identity is
 * `<hostname>_<uuid>`; molt's nodes are named after their hostname. A holder named
 * otherwise (an adopted machine) is left to expire.
 *
 * A Lease with a `strategy` belongs to coordinated leader election: kube-apiserver's
 * coordinator names its holder from the LeaseCandidates that answer its ping, and a
 * candidate never takes such a Lease itself. Emptied by molt, it would only race the
 * coordinator's own write; the stopped component answers no ping, so the coordinator
 * elects another once the Lease expires. It is left alone.
 */
export function releasedLease(spec: LeaseSpecLike | undefined, node: string, now: Date): LeaseSpecLike | undefined {
  if (spec?.strategy) return undefined;
  const holder = spec?.holderIdentity ?? "";
  if (holder !== node && !holder.startsWith(`${node}_`)) return undefined;
  return {
    ...spec,
    holderIdentity: "",
    leaseDurationSeconds: 1,
    acquireTime: now,
    renewTime: now,
  };
}
