// molt:apiEndpoint (mode vip) and molt:vsphere.staticAddresses: accepted shapes, what they
// become for the program and the planner, and every bad value named by its key (nothing
// runs before the whole file is valid).
import * as assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse, stringify } from "yaml";
import { InvalidConfigError, loadStackConfig, stackConfigPath, type StackConfig } from "../../orchestrator/config";
import { placeNewNode, programInputFor } from "../../orchestrator/config/program-input";
import { assignStaticAddress, expandAddressPool } from "../../orchestrator/core/addresses";
import type { NodeEntry } from "../../orchestrator/core/nodes";
import type { VsphereNodeSettings } from "../../infra/providers/vsphere/config";

const repo = [process.cwd(), join(__dirname, "..", "..", "..")].find((r) =>
  existsSync(join(r, "stacks", "Pulumi.lab.yaml")),
)!;
const vsphereExample = (): Record<string, unknown> =>
  (parse(readFileSync(join(repo, "stacks", "Pulumi.vsphere.yaml"), "utf8")) as { config: Record<string, unknown> })
    .config;
const lab = (extra: Record<string, unknown> = {}) => ({
  "molt:provider": "lab",
  "molt:replicas": 3,
  "molt:image": "lab-v1",
  "molt:lab": { name: "t9", subnet: "10.77.109.0/24" },
  ...extra,
});
const pool = { pool: ["10.20.0.11-10.20.0.14"], prefixLength: 24, gateway: "10.20.0.1", nameservers: ["10.20.0.2"] };
const vsphere = (endpoint?: Record<string, unknown>, staticAddresses?: Record<string, unknown>) => {
  const c = structuredClone(vsphereExample());
  if (endpoint) c["molt:apiEndpoint"] = endpoint;
  if (staticAddresses) (c["molt:vsphere"] as Record<string, unknown>).staticAddresses = staticAddresses;
  return c;
};
const entry = (generation: number, address?: string): NodeEntry => ({
  name: `prod-cp-${generation}`,
  image: "templates/ubuntu-2404-k8s-1.34.2",
  kubernetesVersion: "1.34.2",
  role: "control-plane",
  generation,
  init: generation === 1,
  ...(address ? { address } : {}),
});

describe("API endpoint and static addresses (orchestrator/config/endpoint.ts)", () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "molt-config-endpoint-"));
    mkdirSync(join(dir, "stacks"));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));
  const load = (config: Record<string, unknown>): StackConfig => {
    writeFileSync(stackConfigPath(dir, "prod"), stringify({ config }));
    return loadStackConfig(dir, "prod");
  };
  const problemsOf = (config: Record<string, unknown>): string[] => {
    try {
      load(config);
    } catch (e) {
      assert.ok(e instanceof InvalidConfigError, String(e));
      assert.match(e.message, /nothing was changed/);
      return e.problems;
    }
    assert.fail("the configuration was accepted");
  };

  describe("accepted", () => {
    it("lab: mode vip picks a free address of the lab subnet and a router id, and drops the HAProxy", () => {
      const c = load(lab({ "molt:apiEndpoint": { mode: "vip" } }));
      assert.equal(c.lab?.vip?.address, "10.77.109.5");
      assert.ok(c.lab!.vip!.virtualRouterId >= 1 && c.lab!.vip!.virtualRouterId <= 255);
      assert.deepEqual(c.intent.vip, { address: "10.77.109.5" });
      assert.deepEqual(load(lab({ "molt:apiEndpoint": { mode: "vip", address: "10.77.109.250" } })).intent.vip, {
        address: "10.77.109.250",
      });
    });

    it("mode loadBalancer (or no key) keeps the provider's load balancer", () => {
      assert.equal(load(lab({ "molt:apiEndpoint": { mode: "loadBalancer" } })).intent.vip, undefined);
      assert.equal(load(lab()).lab?.vip, undefined);
    });

    it("vSphere: the VIP reaches every node's settings, and new nodes take static addresses from the pool", () => {
      const c = load(vsphere({ mode: "vip", address: "10.20.0.100", virtualRouterId: 51 }, pool));
      assert.deepEqual(c.apiEndpoint, { address: "10.20.0.100", virtualRouterId: 51 });
      assert.ok(c.cloud?.provider === "vsphere");
      assert.deepEqual(c.intent.staticAddressPool, ["10.20.0.11", "10.20.0.12", "10.20.0.13", "10.20.0.14"]);
      assert.deepEqual(c.intent.vip, { address: "10.20.0.100" });
      const input = programInputFor(c, []);
      assert.ok(input.provider === "vsphere");
      const settings = (input.cloud as unknown as { vsphere: VsphereNodeSettings }).vsphere;
      assert.deepEqual(settings.vip, { address: "10.20.0.100", virtualRouterId: 51 });
      assert.deepEqual(settings.staticAddresses, pool);
      // The planner's new entry takes its address from the pool (as placeNewNode does for tools).
      const first = placeNewNode(c, entry(1), []);
      assert.equal(first.address, "10.20.0.11");
      assert.equal(placeNewNode(c, entry(2), [first]).address, "10.20.0.12");
    });
  });

  describe("refused, with the key named", () => {
    const rows: Array<[string, Record<string, unknown>, string, RegExp]> = [
      ["an unknown mode", lab({ "molt:apiEndpoint": { mode: "anycast" } }), "molt:apiEndpoint.mode", /vip/],
      [
        "a VIP that is no IPv4 address",
        lab({ "molt:apiEndpoint": { mode: "vip", address: "10.77.109.300" } }),
        "molt:apiEndpoint.address",
        /IPv4/,
      ],
      [
        "router id 0",
        lab({ "molt:apiEndpoint": { mode: "vip", virtualRouterId: 0 } }),
        "molt:apiEndpoint.virtualRouterId",
        /1-255/,
      ],
      [
        "router id 256",
        lab({ "molt:apiEndpoint": { mode: "vip", virtualRouterId: 256 } }),
        "molt:apiEndpoint.virtualRouterId",
        /1-255/,
      ],
      ["an unknown key", lab({ "molt:apiEndpoint": { mode: "vip", vip: "10.77.109.5" } }), "molt:apiEndpoint", /vip/],
      [
        "a lab VIP a machine could get",
        lab({ "molt:apiEndpoint": { mode: "vip", address: "10.77.109.10" } }),
        "molt:apiEndpoint.address",
        /not free in the lab subnet/,
      ],
      [
        "a lab VIP outside the lab subnet",
        lab({ "molt:apiEndpoint": { mode: "vip", address: "10.1.2.5" } }),
        "molt:apiEndpoint.address",
        /not free/,
      ],
      [
        "VIP settings with mode loadBalancer",
        lab({ "molt:apiEndpoint": { mode: "loadBalancer", address: "10.77.109.5" } }),
        "molt:apiEndpoint",
        /mode vip only/,
      ],
      [
        "a vSphere VIP without address",
        vsphere({ mode: "vip", virtualRouterId: 51 }),
        "molt:apiEndpoint.address",
        /required for mode vip/,
      ],
      [
        "a vSphere VIP without router id",
        vsphere({ mode: "vip", address: "10.20.0.100" }),
        "molt:apiEndpoint.virtualRouterId",
        /required for mode vip/,
      ],
      [
        "a controlPlaneEndpoint that names another address",
        {
          ...vsphere({ mode: "vip", address: "10.20.0.100", virtualRouterId: 51 }),
          "molt:bootstrap": {
            ...(vsphereExample()["molt:bootstrap"] as object),
            controlPlaneEndpoint: "10.20.0.99:6443",
          },
        },
        "molt:bootstrap.controlPlaneEndpoint",
        /must name the VIP 10\.20\.0\.100/,
      ],
      [
        "the VIP inside the static pool",
        vsphere({ mode: "vip", address: "10.20.0.12", virtualRouterId: 51 }, pool),
        "molt:apiEndpoint.address",
        /staticAddresses\.pool/,
      ],
      [
        "a pool entry that is no address",
        vsphere(undefined, { ...pool, pool: ["10.20.0.x"] }),
        "molt:vsphere.staticAddresses.pool",
        /not an IPv4 address or range/,
      ],
      [
        "a range that ends before it starts",
        vsphere(undefined, { ...pool, pool: ["10.20.0.19-10.20.0.11"] }),
        "molt:vsphere.staticAddresses.pool",
        /ends before it starts/,
      ],
      [
        "pool addresses outside the gateway's network",
        vsphere(undefined, { ...pool, pool: ["10.21.0.11-10.21.0.14"] }),
        "molt:vsphere.staticAddresses.pool",
        /not in the gateway's network/,
      ],
      [
        "fewer addresses than replicas + 1",
        vsphere(undefined, { ...pool, pool: ["10.20.0.11-10.20.0.13"] }),
        "molt:vsphere.staticAddresses.pool",
        /replicas \+ 1/,
      ],
      [
        "the gateway in the pool",
        vsphere(undefined, { ...pool, pool: ["10.20.0.1-10.20.0.5"] }),
        "molt:vsphere.staticAddresses.pool",
        /gateway/,
      ],
      [
        "a prefix length of 33",
        vsphere(undefined, { ...pool, prefixLength: 33 }),
        "molt:vsphere.staticAddresses.prefixLength",
        /./,
      ],
      [
        "a missing gateway",
        vsphere(undefined, { pool: pool.pool, prefixLength: 24 }),
        "molt:vsphere.staticAddresses.gateway",
        /gateway/,
      ],
    ];
    for (const [title, config, key, why] of rows)
      it(`refuses ${title}`, () => {
        const problems = problemsOf(config);
        assert.ok(
          problems.some((p) => p.startsWith(`${key}: `) && why.test(p)),
          `no "${key}: ${why.source}" in ${JSON.stringify(problems, null, 1)}`,
        );
      });

    for (const provider of ["aws", "azure"])
      it(`refuses mode vip on ${provider}: its network drops VRRP`, () => {
        const c = parse(readFileSync(join(repo, "stacks", `Pulumi.${provider}.yaml`), "utf8")) as {
          config: Record<string, unknown>;
        };
        const problems = problemsOf({
          ...c.config,
          "molt:apiEndpoint": { mode: "vip", address: "10.0.0.100", virtualRouterId: 51 },
        });
        assert.ok(
          problems.some((p) => p.startsWith("molt:apiEndpoint.mode: ") && /not possible on/.test(p)),
          JSON.stringify(problems),
        );
      });
  });

  describe("static address assignment (orchestrator/core/addresses.ts)", () => {
    const addrs = expandAddressPool(["10.20.0.11-10.20.0.13", "10.20.0.20"]);

    it("expands ranges and single addresses, refusing duplicates", () => {
      assert.deepEqual(addrs, ["10.20.0.11", "10.20.0.12", "10.20.0.13", "10.20.0.20"]);
      assert.throws(() => expandAddressPool(["10.20.0.11", "10.20.0.11"]), /twice/);
    });

    it("reuses a retired node's address as late as possible: the first free one after the newest node's", () => {
      const nodes = [entry(2, "10.20.0.12"), entry(3, "10.20.0.13"), entry(4, "10.20.0.20")];
      // 10.20.0.11 was freed by node 1; after the newest (.20) the pool wraps to .11.
      assert.equal(assignStaticAddress(entry(5), nodes, addrs).address, "10.20.0.11");
      const later = [entry(3, "10.20.0.13"), entry(4, "10.20.0.20"), entry(5, "10.20.0.11")];
      assert.equal(assignStaticAddress(entry(6), later, addrs).address, "10.20.0.12");
    });

    it("never gives an address in use, and says so when the pool is exhausted", () => {
      const full = addrs.map((a, i) => entry(i + 1, a));
      assert.throws(() => assignStaticAddress(entry(9), full, addrs), /no free static address.*replicas \+ 1/);
    });

    it("keeps an address once given, and gives none without a pool", () => {
      assert.equal(assignStaticAddress(entry(5, "10.20.0.13"), [], addrs).address, "10.20.0.13");
      assert.equal(assignStaticAddress(entry(5), [], []).address, undefined);
    });
  });
});
