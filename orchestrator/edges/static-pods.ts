// A retiring node's control-plane static pods, as stop-apiserver stops them (edges/kube.ts):
// where each manifest is moved aside, which port each serves on (the manifest's own
// --secure-port, which a cluster may move), and the shell check that a component is gone:
// nothing listens on its port and no process of its binary runs in the node's network
// namespace. A closed port alone is not enough: a component that moved its port, or has
// not yet bound it, would pass at once.
import { parse as parseYaml } from "yaml";

export interface StaticPod {
  /** The manifest's name and the binary's: kubeadm runs each component as `command[0]`. */
  name: "kube-controller-manager" | "kube-scheduler" | "kube-apiserver";
  /** kubeadm's --secure-port default. */
  defaultPort: number;
}

export const CONTROLLERS: readonly StaticPod[] = [
  { name: "kube-controller-manager", defaultPort: 10257 },
  { name: "kube-scheduler", defaultPort: 10259 },
];

export const APISERVER: StaticPod = { name: "kube-apiserver", defaultPort: 6443 };

export const manifestPath = (name: string): string => `/etc/kubernetes/manifests/${name}.yaml`;
/** Where stop-apiserver moves a manifest: the kubelet stops the pod, the file stays for a rerun to read. */
export const retiredPath = (name: string): string => `/etc/kubernetes/${name}.yaml.retired`;

/** The static pod a moved-aside manifest belongs to; undefined for any other path. */
export function staticPodOfRetired(path: string): string | undefined {
  return /^\/etc\/kubernetes\/([a-z0-9-]+)\.yaml\.retired$/.exec(path)?.[1];
}

/** `ls -1 /etc/kubernetes/*.yaml.retired`'s output: the moved-aside manifests, sorted. */
export function retiredManifestsOf(stdout: string): string[] {
  return stdout
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => staticPodOfRetired(l) !== undefined)
    .sort();
}

const MARK = "### molt static pod ";

/** Prints each pod's manifest, from its place or from where it was moved aside, after a marker line (none: nothing). */
export function readManifestsCommand(pods: readonly StaticPod[]): string {
  return pods
    .map(
      (p) =>
        `echo "${MARK}${p.name}"; cat ${manifestPath(p.name)} 2>/dev/null || cat ${retiredPath(p.name)} 2>/dev/null`,
    )
    .join("; ")
    .concat("; true");
}

/** readManifestsCommand's output, per pod name (absent: neither file was there). */
export function manifestsOf(stdout: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of stdout.split(MARK).slice(1)) {
    const nl = part.indexOf("\n");
    const name = (nl < 0 ? part : part.slice(0, nl)).trim();
    const body = nl < 0 ? "" : part.slice(nl + 1);
    if (body.trim()) out[name] = body;
  }
  return out;
}

/**
 * The port a static pod's manifest says its component serves on: its --secure-port (either
 * form), else the default; undefined for --secure-port=0 (no secure serving: only its
 * process can tell it is gone). A manifest that cannot be read leaves the default.
 */
export function securePortOf(manifest: string | undefined, defaultPort: number): number | undefined {
  let doc: { spec?: { containers?: { command?: unknown[]; args?: unknown[] }[] } } | null;
  try {
    doc = manifest ? (parseYaml(manifest) as typeof doc) : null;
  } catch {
    doc = null;
  }
  for (const c of doc?.spec?.containers ?? []) {
    const argv = [...(c.command ?? []), ...(c.args ?? [])].map(String);
    for (let i = 0; i < argv.length; i++) {
      const value = argv[i].startsWith("--secure-port=")
        ? argv[i].slice("--secure-port=".length)
        : argv[i] === "--secure-port"
          ? argv[i + 1]
          : undefined;
      if (value === undefined || !/^\d+$/.test(value.trim())) continue;
      const port = Number(value);
      return port === 0 ? undefined : port;
    }
  }
  return defaultPort;
}

export interface Watched {
  binary: string;
  port?: number;
  /** Whether its process must be gone too (default); false: its port closed is enough (a port is then required). */
  process?: boolean;
}

/**
 * A shell script (no single quotes: it goes inside `sh -c '...'`, run as root) that prints
 * one line per thing still running: `listening: <ss line>` for a watched port, `process:
 * <binary> (pid N)` for a process whose argv[0] is a watched binary in this network
 * namespace. /proc/PID/comm would not do: it is cut to 15 characters ("kube-controller").
 * The namespace keeps out other machines' components where machines share a PID namespace
 * (the lab); kubeadm's control plane runs in the host's network. Exits non-zero when `ss`
 * cannot be asked.
 */
export function stillRunningScript(watched: readonly Watched[]): string {
  const ports = watched.flatMap((w) => (w.port === undefined ? [] : [`sport = :${w.port}`]));
  if (watched.some((w) => w.process === false && w.port === undefined))
    throw new Error(`internal: ${watched.map((w) => w.binary).join(", ")}: neither a port nor a process to watch`);
  const names = watched.filter((w) => w.process !== false).map((w) => w.binary);
  if (names.some((n) => !/^[a-z0-9-]+$/.test(n))) throw new Error(`not a binary name: ${names.join(", ")}`);
  const alt = names.join("|");
  if (names.length === 0) return [...listening(ports), "exit 0"].join("\n");
  return [
    ...listening(ports),
    "self=$(readlink /proc/self/ns/net)",
    // One grep finds the candidates (an argument equal to a binary's name or path); argv[0] decides.
    `for f in $(grep -l -a -z -x -E "(.*/)?(${alt})" /proc/[0-9]*/cmdline 2>/dev/null); do`,
    "  p=${f%/cmdline}",
    `  [ "$(readlink $p/ns/net 2>/dev/null)" = "$self" ] || continue`,
    `  a=$(tr "\\000" "\\n" < $f 2>/dev/null | head -n 1)`,
    `  case "\${a##*/}" in ${alt}) echo "process: \${a##*/} (pid \${p#/proc/})";; esac`,
    "done",
    "exit 0",
  ].join("\n");
}

/** The lines of stillRunningScript that print what still listens on the watched ports. */
function listening(ports: string[]): string[] {
  return ports.length
    ? [
        `out=$(ss -ltnH "( ${ports.join(" or ")} )") || exit 1`,
        `if [ -n "$out" ]; then printf "%s\\n" "$out" | sed "s/^/listening: /"; fi`,
      ]
    : [];
}

/** What stillRunningScript printed: the things still running, one each (none: all gone). */
export function stillRunning(stdout: string): string[] {
  return stdout
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l.startsWith("listening: ") || l.startsWith("process: "));
}
