// What `molt adopt` is told about a running cluster: KubeOne's `terraform output -json`
// (the kubeone_api and kubeone_hosts outputs of its examples/terraform/*/output.tf), or a
// plain list of hosts plus the API endpoint. Pure: text in, a checked description out;
// every problem is reported at once, with what to do.
import { publicKeyBlob } from "../../infra/remote/ssh";

export class InvalidAdoptionInputError extends Error {
  constructor(
    readonly source: string,
    readonly problems: string[],
  ) {
    super(`${source} cannot be adopted from; nothing was recorded:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "InvalidAdoptionInputError";
  }
}

export interface AdoptionHost {
  /** The node's address on the control-plane network (its etcd peer URL's host). */
  address: string;
  /** Where molt opens SSH: the private address through a bastion, else the public one if any. */
  sshHost: string;
  sshPort: number;
  sshUser?: string;
  /** The hostname the installer gave, when it gave one (checked against the etcd member's name). */
  hostname?: string;
  /** A host key the installer recorded (KubeOne's ssh_hosts_keys), if any. */
  hostKey?: string;
}

export interface AdoptionInput {
  source: "kubeone" | "hosts";
  /** host:port of the cluster's API endpoint (its load balancer); absent for an etcd-only cluster. */
  apiEndpoint?: string;
  clusterName?: string;
  hosts: AdoptionHost[];
  /** The bastion the installer reaches the hosts through. */
  bastion?: { host: string; port: number; user?: string; hostKey?: string };
  /** The installer's SSH key sources, for the record and for a hint (molt uses molt:ssh). */
  sshKeySource?: { privateKeyFile?: string; agentSocket?: string };
}

const ADDRESS = /^[A-Za-z0-9]([A-Za-z0-9.:-]*[A-Za-z0-9])?$/;
const ENDPOINT = /^([A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9a-fA-F:]+\]):(\d{1,5})$/;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** `terraform output -json` wraps every output as { sensitive, type, value }. */
function outputValue(doc: Record<string, unknown>, name: string, problems: string[]): unknown {
  const o = doc[name];
  if (o === undefined) {
    problems.push(
      `no "${name}" output: is this KubeOne's \`terraform output -json\` (examples/terraform/*/output.tf)?`,
    );
    return undefined;
  }
  if (!isObject(o) || !("value" in o)) {
    problems.push(`"${name}" is not a terraform output ({ "sensitive", "type", "value" })`);
    return undefined;
  }
  return o.value;
}

function str(v: unknown): string | undefined {
  return typeof v === "string" && v.trim() !== "" ? v.trim() : undefined;
}

function port(v: unknown, what: string, problems: string[]): number | undefined {
  if (v === undefined || v === null || v === 0 || v === "") return undefined;
  const n = typeof v === "string" && /^\d+$/.test(v) ? Number(v) : v;
  if (typeof n !== "number" || !Number.isInteger(n) || n < 1 || n > 65535) {
    problems.push(`${what}: ${JSON.stringify(v)} is not a TCP port`);
    return undefined;
  }
  return n;
}

/** A host key as KubeOne writes it: an OpenSSH line, or that line base64-encoded ([]byte in its Go types). */
export function hostKeyLine(v: unknown): string | undefined {
  const s = str(v);
  if (!s) return undefined;
  for (const candidate of [s, Buffer.from(s, "base64").toString("utf8").trim()]) {
    try {
      publicKeyBlob(candidate);
      return candidate.split(/\s+/).slice(0, 2).join(" ");
    } catch {
      /* try the next form */
    }
  }
  return undefined;
}

function addressList(v: unknown, what: string, problems: string[]): string[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || v.some((a) => typeof a !== "string")) {
    problems.push(`${what}: a list of addresses`);
    return [];
  }
  const bad = (v as string[]).filter((a) => !ADDRESS.test(a));
  if (bad.length) problems.push(`${what}: not addresses: ${bad.map((b) => JSON.stringify(b)).join(", ")}`);
  return v as string[];
}

/** Reads KubeOne's `terraform output -json`. */
export function parseKubeOneOutput(text: string, source = "the terraform output"): AdoptionInput {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new InvalidAdoptionInputError(source, [
      `not valid JSON (${(e as Error).message}); a truncated file? Write it again with \`terraform output -json > ` +
        `FILE\``,
    ]);
  }
  if (!isObject(doc)) throw new InvalidAdoptionInputError(source, ["not a JSON object of terraform outputs"]);
  const problems: string[] = [];
  const api = outputValue(doc, "kubeone_api", problems);
  const hostsOut = outputValue(doc, "kubeone_hosts", problems);
  const apiEndpoint = isObject(api) ? str(api.endpoint) : undefined;
  if (api !== undefined && !apiEndpoint) problems.push("kubeone_api.value.endpoint: missing (the API load balancer)");
  const cp = isObject(hostsOut) ? hostsOut.control_plane : undefined;
  if (hostsOut !== undefined && !isObject(cp))
    problems.push("kubeone_hosts.value.control_plane: missing (the control-plane hosts)");
  if (problems.length) throw new InvalidAdoptionInputError(source, problems);
  const c = cp as Record<string, unknown>;
  const at = (k: string) => `kubeone_hosts.value.control_plane.${k}`;
  const publicAddrs = addressList(c.public_address, at("public_address"), problems);
  const privateAddrs = addressList(c.private_address, at("private_address"), problems);
  const hostnames = Array.isArray(c.hostnames) ? c.hostnames.map((h) => str(h)) : [];
  const rawKeys = Array.isArray(c.ssh_hosts_keys) ? c.ssh_hosts_keys : [];
  const bastionHost = str(c.bastion);
  const sshPort = port(c.ssh_port, at("ssh_port"), problems) ?? 22;
  const bastionPort = port(c.bastion_port, at("bastion_port"), problems) ?? 22;
  const count = Math.max(publicAddrs.length, privateAddrs.length);
  if (count === 0) problems.push(`${at("private_address")}: no control-plane hosts`);
  if (publicAddrs.length && privateAddrs.length && publicAddrs.length !== privateAddrs.length)
    problems.push(
      `${at("public_address")} has ${publicAddrs.length} addresses but private_address ${privateAddrs.length}: a ` +
        `truncated output?`,
    );
  if (hostnames.length && hostnames.length !== count)
    problems.push(`${at("hostnames")} has ${hostnames.length} names for ${count} hosts: a truncated output?`);
  const keys = rawKeys.map((k, i) => {
    if (k === null || k === "") return undefined;
    const line = hostKeyLine(k);
    if (!line) problems.push(`${at("ssh_hosts_keys")}[${i}]: not an SSH public key`);
    return line;
  });
  if (bastionHost && !ADDRESS.test(bastionHost)) problems.push(`${at("bastion")}: not an address`);
  if (apiEndpoint && !ENDPOINT.test(apiEndpoint) && !ADDRESS.test(apiEndpoint))
    problems.push(`kubeone_api.value.endpoint: ${JSON.stringify(apiEndpoint)} is not host[:port]`);
  if (problems.length) throw new InvalidAdoptionInputError(source, problems);
  const hosts: AdoptionHost[] = [];
  for (let i = 0; i < count; i++) {
    // KubeOne connects to the public address, or the private one where there is none; through
    // a bastion, to the private address as the bastion sees it.
    const address = privateAddrs[i] ?? publicAddrs[i];
    const sshHost = bastionHost ? address : (publicAddrs[i] ?? address);
    hosts.push({
      address,
      sshHost,
      sshPort,
      ...(str(c.ssh_user) ? { sshUser: str(c.ssh_user) } : {}),
      ...(hostnames[i] ? { hostname: hostnames[i] } : {}),
      ...(keys[i] ? { hostKey: keys[i] } : {}),
    });
  }
  const dup = hosts.map((h) => h.address).filter((a, i, all) => all.indexOf(a) !== i);
  if (dup.length) throw new InvalidAdoptionInputError(source, [`hosts listed twice: ${[...new Set(dup)].join(", ")}`]);
  const bastionKey = hostKeyLine(c.bastion_host_key);
  return {
    source: "kubeone",
    apiEndpoint: apiEndpoint!.includes(":") ? apiEndpoint! : `${apiEndpoint}:6443`,
    ...(str(c.cluster_name) ? { clusterName: str(c.cluster_name) } : {}),
    hosts,
    ...(bastionHost
      ? {
          bastion: {
            host: bastionHost,
            port: bastionPort,
            ...(str(c.bastion_user) ? { user: str(c.bastion_user) } : {}),
            ...(bastionKey ? { hostKey: bastionKey } : {}),
          },
        }
      : {}),
    ...(str(c.ssh_private_key_file) || str(c.ssh_agent_socket)
      ? {
          sshKeySource: {
            ...(str(c.ssh_private_key_file) ? { privateKeyFile: str(c.ssh_private_key_file) } : {}),
            ...(str(c.ssh_agent_socket) ? { agentSocket: str(c.ssh_agent_socket) } : {}),
          },
        }
      : {}),
  };
}

/**
 * A plain host list: `--host ADDRESS[:SSHPORT]` per control-plane node, `--api-endpoint
 * HOST:PORT` (none for an etcd-only cluster), and the bastion of molt:ssh.
 */
export function parseHostList(hosts: string[], apiEndpoint: string | undefined): AdoptionInput {
  const problems: string[] = [];
  const parsed: AdoptionHost[] = [];
  for (const h of hosts) {
    const m = /^([A-Za-z0-9][A-Za-z0-9.-]*[A-Za-z0-9]|\[[0-9a-fA-F:]+\])(?::(\d{1,5}))?$/.exec(h.trim());
    if (!m) {
      problems.push(
        `--host ${JSON.stringify(h)}: an address, optionally with its SSH port (10.0.1.10 or 10.0.1.10:2222)`,
      );
      continue;
    }
    const p = m[2] ? Number(m[2]) : 22;
    if (p < 1 || p > 65535) problems.push(`--host ${h}: ${p} is not a TCP port`);
    parsed.push({ address: m[1], sshHost: m[1], sshPort: p });
  }
  if (hosts.length === 0) problems.push("--host: name every control-plane host (one --host per node)");
  const dup = parsed.map((h) => h.address).filter((a, i, all) => all.indexOf(a) !== i);
  if (dup.length) problems.push(`--host: listed twice: ${[...new Set(dup)].join(", ")}`);
  if (apiEndpoint !== undefined && !ENDPOINT.test(apiEndpoint))
    problems.push(`--api-endpoint ${JSON.stringify(apiEndpoint)}: host:port of the API load balancer`);
  if (problems.length) throw new InvalidAdoptionInputError("the host list", problems);
  return { source: "hosts", ...(apiEndpoint ? { apiEndpoint } : {}), hosts: parsed };
}
