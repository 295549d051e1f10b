// What `molt adopt` accepts as the cluster to adopt: KubeOne's `terraform output -json` and
// a host list (orchestrator/adopt/input.ts), and the host keys it expects (host-keys.ts).
import * as assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import {
  InvalidAdoptionInputError,
  parseHostList,
  parseKubeOneOutput,
  type AdoptionInput,
} from "../../../orchestrator/adopt/input";
import { ExpectedHostKeys, InvalidHostKeyInputError } from "../../../orchestrator/adopt/host-keys";
import { fingerprintOf, generateSshKeyPair } from "../../../infra/remote/ssh";

const out = (name: string, value: unknown) => ({ [name]: { sensitive: false, type: ["object", []], value } });

/** The shape of KubeOne's examples/terraform/aws/output.tf, as `terraform output -json` prints it. */
function kubeone(cp: Record<string, unknown> = {}, api: unknown = { endpoint: "api.k1.example.com:6443" }): string {
  return JSON.stringify({
    ...out("kubeone_api", api),
    ...out("kubeone_hosts", {
      control_plane: {
        cluster_name: "k1",
        cloud_provider: "aws",
        private_address: ["10.0.1.10", "10.0.1.11", "10.0.1.12"],
        hostnames: ["ip-10-0-1-10", "ip-10-0-1-11", "ip-10-0-1-12"],
        operating_system: "ubuntu",
        ssh_agent_socket: "env:SSH_AUTH_SOCK",
        ssh_port: 22,
        ssh_private_key_file: "",
        ssh_user: "ubuntu",
        ssh_hosts_keys: null,
        bastion: "203.0.113.7",
        bastion_port: 22,
        bastion_user: "ubuntu",
        bastion_host_key: null,
        labels: {},
        ...cp,
      },
    }),
    ...out("ssh_commands", ["ssh -J ubuntu@203.0.113.7 ubuntu@10.0.1.10"]),
  });
}

function problems(f: () => AdoptionInput): string[] {
  try {
    f();
  } catch (e) {
    assert.ok(e instanceof InvalidAdoptionInputError, String(e));
    assert.match(e.message, /nothing was recorded/);
    return e.problems;
  }
  assert.fail("accepted");
}

describe("adoption input: KubeOne's terraform output (orchestrator/adopt/input.ts)", () => {
  it("reads the control-plane hosts, the API endpoint and the bastion", () => {
    const i = parseKubeOneOutput(kubeone());
    assert.equal(i.source, "kubeone");
    assert.equal(i.apiEndpoint, "api.k1.example.com:6443");
    assert.equal(i.clusterName, "k1");
    assert.deepEqual(i.bastion, { host: "203.0.113.7", port: 22, user: "ubuntu" });
    assert.deepEqual(i.hosts[1], {
      address: "10.0.1.11",
      sshHost: "10.0.1.11",
      sshPort: 22,
      sshUser: "ubuntu",
      hostname: "ip-10-0-1-11",
    });
    assert.deepEqual(i.sshKeySource, { agentSocket: "env:SSH_AUTH_SOCK" });
  });

  it("connects to public addresses without a bastion, and keeps the private ones for etcd", () => {
    const i = parseKubeOneOutput(
      kubeone({ bastion: "", public_address: ["198.51.100.1", "198.51.100.2", "198.51.100.3"], ssh_port: 2222 }),
    );
    assert.equal(i.bastion, undefined);
    assert.deepEqual(
      i.hosts.map((h) => [h.address, h.sshHost, h.sshPort]),
      [
        ["10.0.1.10", "198.51.100.1", 2222],
        ["10.0.1.11", "198.51.100.2", 2222],
        ["10.0.1.12", "198.51.100.3", 2222],
      ],
    );
  });

  it("takes recorded host keys, as lines or base64 ([]byte in KubeOne's types), and a port-less endpoint", () => {
    const k = generateSshKeyPair("h0").publicKey;
    const i = parseKubeOneOutput(
      kubeone({ ssh_hosts_keys: [k, Buffer.from(k).toString("base64"), null] }, { endpoint: "10.0.1.5" }),
    );
    assert.equal(i.hosts[0].hostKey, k.split(" ").slice(0, 2).join(" "));
    assert.equal(i.hosts[1].hostKey, i.hosts[0].hostKey);
    assert.equal(i.hosts[2].hostKey, undefined);
    assert.equal(i.apiEndpoint, "10.0.1.5:6443");
  });

  const bad: [string, string, RegExp][] = [
    ["not JSON", "{ not json", /not valid JSON.*terraform output -json/],
    ["truncated", kubeone().slice(0, 180), /not valid JSON.*truncated/],
    ["an array", "[]", /not a JSON object/],
    ["no kubeone_hosts", JSON.stringify(out("kubeone_api", { endpoint: "a:6443" })), /no "kubeone_hosts" output/],
    ["no kubeone_api", JSON.stringify(out("kubeone_hosts", { control_plane: {} })), /no "kubeone_api" output/],
    [
      "outputs without value (terraform output without -json)",
      JSON.stringify({ kubeone_api: "x", kubeone_hosts: "y" }),
      /"kubeone_api" is not a terraform output/,
    ],
    [
      "no control_plane",
      JSON.stringify({ ...out("kubeone_api", { endpoint: "a" }), ...out("kubeone_hosts", {}) }),
      /control_plane: missing/,
    ],
    ["no endpoint", kubeone({}, { apiserver_alternative_names: [] }), /kubeone_api\.value\.endpoint: missing/],
    ["no hosts", kubeone({ private_address: [], hostnames: [] }), /no control-plane hosts/],
    ["addresses not a list", kubeone({ private_address: "10.0.1.10" }), /private_address: a list of addresses/],
    [
      "an address with a space",
      kubeone({ private_address: ["10.0.1.10", "10.0.1 .11", "10.0.1.12"] }),
      /not addresses: "10\.0\.1 \.11"/,
    ],
    ["hostnames of a truncated list", kubeone({ hostnames: ["a", "b"] }), /2 names for 3 hosts/],
    [
      "public and private of different lengths",
      kubeone({ public_address: ["1.1.1.1"] }),
      /1 addresses but private_address 3/,
    ],
    ["a bad ssh port", kubeone({ ssh_port: 70000 }), /ssh_port: 70000 is not a TCP port/],
    ["a bad host key", kubeone({ ssh_hosts_keys: ["SHA256:abc"] }), /ssh_hosts_keys\[0\]: not an SSH public key/],
    [
      "a host twice",
      kubeone({ private_address: ["10.0.1.10", "10.0.1.10", "10.0.1.12"] }),
      /listed twice: 10\.0\.1\.10/,
    ],
  ];
  for (const [title, text, why] of bad) {
    it(`refuses ${title}`, () => {
      const p = problems(() => parseKubeOneOutput(text));
      assert.ok(
        p.some((x) => why.test(x)),
        JSON.stringify(p),
      );
    });
  }

  it("reports every problem at once", () => {
    const p = problems(() => parseKubeOneOutput(kubeone({ ssh_port: -1, bastion_port: "x", hostnames: ["a"] })));
    assert.equal(p.length, 3, JSON.stringify(p));
  });
});

describe("adoption input: a host list", () => {
  it("takes addresses with optional SSH ports and the API endpoint", () => {
    const i = parseHostList(["10.0.1.10", "10.0.1.11:2222", "cp-3.example.com"], "10.0.1.5:6443");
    assert.deepEqual(
      i.hosts.map((h) => [h.address, h.sshPort]),
      [
        ["10.0.1.10", 22],
        ["10.0.1.11", 2222],
        ["cp-3.example.com", 22],
      ],
    );
    assert.equal(i.apiEndpoint, "10.0.1.5:6443");
    assert.equal(parseHostList(["10.0.1.10"], undefined).apiEndpoint, undefined);
  });

  const bad: [string, string[], string | undefined, RegExp][] = [
    ["no host", [], undefined, /name every control-plane host/],
    ["a user@host", ["root@10.0.1.10"], undefined, /an address, optionally with its SSH port/],
    ["a port out of range", ["10.0.1.10:99999"], undefined, /99999 is not a TCP port/],
    ["a host twice", ["10.0.1.10", "10.0.1.10:22"], undefined, /listed twice/],
    ["an endpoint without a port", ["10.0.1.10"], "10.0.1.5", /--api-endpoint "10\.0\.1\.5": host:port/],
    ["an endpoint URL", ["10.0.1.10"], "https://10.0.1.5:6443", /host:port/],
  ];
  for (const [title, hosts, api, why] of bad) {
    it(`refuses ${title}`, () => {
      const p = problems(() => parseHostList(hosts, api));
      assert.ok(
        p.some((x) => why.test(x)),
        JSON.stringify(p),
      );
    });
  }
});

describe("expected host keys (orchestrator/adopt/host-keys.ts)", () => {
  const a = generateSshKeyPair("a").publicKey;
  const b = generateSshKeyPair("b").publicKey;

  it("matches a --host-key fingerprint, and names the expected one on a mismatch", () => {
    const k = new ExpectedHostKeys().addFlags([`10.0.1.10=${fingerprintOf(a)}`, `10.0.1.11:2222=${b}`]);
    assert.deepEqual(k.verdict("10.0.1.10", 22, a), { kind: "match", source: "--host-key" });
    assert.deepEqual(k.verdict("10.0.1.10", 22, b), {
      kind: "mismatch",
      source: "--host-key",
      expected: [fingerprintOf(a)],
    });
    assert.equal(k.verdict("10.0.1.11", 2222, b).kind, "match");
    assert.equal(k.verdict("10.0.1.12", 22, a).kind, "unknown");
  });

  it("reads known_hosts with plain, [host]:port and hashed names; markers and wildcards pin nothing", () => {
    const salt = Buffer.from("0123456789abcdef0123");
    const hashed = `|1|${salt.toString("base64")}|${createHmac("sha1", salt).update("10.0.1.12").digest("base64")}`;
    const text = [
      "# comment",
      `10.0.1.10,cp-1 ${a}`,
      `[10.0.1.11]:2222 ${b}`,
      `${hashed} ${a}`,
      `@cert-authority *.example.com ${b}`,
      `10.0.1.* ${b}`,
    ].join("\n");
    const k = new ExpectedHostKeys().addKnownHosts(text, "kh");
    assert.equal(k.verdict("10.0.1.10", 22, a).kind, "match");
    assert.equal(k.verdict("10.0.1.11", 2222, b).kind, "match");
    assert.equal(k.verdict("10.0.1.11", 22, b).kind, "unknown");
    assert.equal(k.verdict("10.0.1.12", 22, a).kind, "match");
    assert.equal(k.verdict("10.0.1.12", 22, b).kind, "mismatch");
    assert.equal(k.verdict("10.0.1.13", 22, b).kind, "unknown");
  });

  it("takes the installer's recorded keys last", () => {
    const k = new ExpectedHostKeys().addInstallerKey("10.0.1.10", 22, a);
    assert.deepEqual(k.verdict("10.0.1.10", 22, a), { kind: "match", source: "the installer's recorded host keys" });
    k.addFlags([`10.0.1.10=${fingerprintOf(b)}`]);
    assert.equal(k.verdict("10.0.1.10", 22, a).kind, "mismatch", "a flag overrides the installer");
  });

  it("refuses malformed expectations", () => {
    assert.throws(() => new ExpectedHostKeys().addFlags(["10.0.1.10"]), InvalidHostKeyInputError);
    assert.throws(() => new ExpectedHostKeys().addFlags(["10.0.1.10=SHA256:short"]), /HOST=SHA256/);
    assert.throws(
      () => new ExpectedHostKeys().addKnownHosts("10.0.1.10 ssh-ed25519\n", "kh"),
      /kh:1: not a known_hosts/,
    );
  });
});
