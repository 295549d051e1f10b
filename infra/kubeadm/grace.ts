// The kube-apiserver pod's termination grace period on the nodes molt makes.
//
// kubeadm's kube-apiserver manifest sets no terminationGracePeriodSeconds, so the kubelet
// kills the API server 30 s after SIGTERM. On SIGTERM it serves for --shutdown-delay-duration
// (/readyz failing, so load balancers take it out), then stops listening and waits up to
// --request-timeout (ShutdownTimeout, 60 s by default) for requests in flight
// (k8s.io/apiserver pkg/server/lifecycle_signals.go). With a delay of 60 s, molt's cloud
// default, the kubelet's kill came halfway through the delay. The grace period molt sets is
// the delay plus the request timeout plus a margin: the API server then ends its shutdown on
// its own, and the kubelet's kill is only the bound it always was.
import { parse as parseYaml } from "yaml";

/** kube-apiserver's --request-timeout default, which also bounds its HTTP server's shutdown. */
export const API_SERVER_REQUEST_TIMEOUT_SECONDS = 60;
/** What the kubelet gives beyond the API server's own bound (its SIGTERM to SIGKILL, process exit). */
export const GRACE_MARGIN_SECONDS = 5;

/** The grace period that covers a shutdown delay and the requests in flight after it. */
export function apiServerGracePeriodSeconds(
  shutdownDelaySeconds: number,
  requestTimeoutSeconds = API_SERVER_REQUEST_TIMEOUT_SECONDS,
): number {
  return Math.ceil(shutdownDelaySeconds + requestTimeoutSeconds + GRACE_MARGIN_SECONDS);
}

/** A Go duration ("60s", "1m30s", "1h", "500ms", "0") in seconds; undefined when it is not one. */
export function goDurationSeconds(text: string): number | undefined {
  const s = text.trim();
  if (s === "0") return 0;
  const unit: Record<string, number> = { h: 3600, m: 60, s: 1, ms: 1e-3, us: 1e-6, µs: 1e-6, ns: 1e-9 };
  const part = /(\d+(?:\.\d*)?|\.\d+)(h|ms|m|s|us|µs|ns)/y;
  let total = 0;
  let at = 0;
  while (at < s.length) {
    part.lastIndex = at;
    const m = part.exec(s);
    if (!m) return undefined;
    total += Number(m[1]) * unit[m[2]];
    at = part.lastIndex;
  }
  return at > 0 ? total : undefined;
}

/** kubeadm's apiServer.extraArgs: a map in v1beta3, a list of { name, value } from v1beta4 on. */
function extraArg(args: unknown, name: string): string | undefined {
  if (Array.isArray(args)) {
    // kubeadm applies them in order; the last one wins.
    const hits = args.filter((a) => (a as { name?: unknown })?.name === name);
    const v = (hits.at(-1) as { value?: unknown } | undefined)?.value;
    return typeof v === "string" ? v : undefined;
  }
  if (args && typeof args === "object") {
    const v = (args as Record<string, unknown>)[name];
    return typeof v === "string" ? v : undefined;
  }
  return undefined;
}

/**
 * The grace period for the API server of a node that joins a cluster whose kubeadm-config
 * holds `clusterConfiguration` (kubeadm join renders its manifest from that, not from
 * molt's settings): its --shutdown-delay-duration and --request-timeout, kube-apiserver's
 * defaults (0 s, 60 s) where it names none. Throws on values kube-apiserver would refuse.
 */
export function apiServerGraceFromClusterConfiguration(clusterConfiguration: string): {
  seconds: number;
  shutdownDelaySeconds: number;
  requestTimeoutSeconds: number;
} {
  let cc: unknown;
  try {
    cc = parseYaml(clusterConfiguration);
  } catch (e) {
    throw new Error(`kubeadm-config's ClusterConfiguration is not YAML (${(e as Error).message.split("\n")[0]})`);
  }
  const args = (cc as { apiServer?: { extraArgs?: unknown } } | null)?.apiServer?.extraArgs;
  const read = (name: string, fallback: number): number => {
    const text = extraArg(args, name);
    if (text === undefined) return fallback;
    const v = goDurationSeconds(text);
    if (v === undefined)
      throw new Error(`kubeadm-config's apiServer.extraArgs has ${name}=${JSON.stringify(text)}, not a duration`);
    return v;
  };
  const shutdownDelaySeconds = read("shutdown-delay-duration", 0);
  const requestTimeoutSeconds = read("request-timeout", API_SERVER_REQUEST_TIMEOUT_SECONDS);
  return {
    seconds: apiServerGracePeriodSeconds(shutdownDelaySeconds, requestTimeoutSeconds),
    shutdownDelaySeconds,
    requestTimeoutSeconds,
  };
}
