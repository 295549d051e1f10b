// Issue #16 under Pulumi mocks: the stack program as molt runs it (example stacks loaded by
// orchestrator/config/index.ts, program input, registry), with the settings the fixes added.
import * as assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { parse, stringify } from "yaml";
import type { NodeEntry } from "../../../orchestrator/core/nodes";
import { buildProgram, type MoltOutputs } from "../../../infra/program";
import { AwsControlPlaneSecurityGroup } from "../../../infra/providers/aws";
import { AzureControlPlaneNode, type AzureNodeSettings } from "../../../infra/providers/azure";
import { VSPHERE_TOKENS } from "../../../infra/providers/vsphere";
import { generateSshKeyPair } from "../../../infra/remote/ssh";
import { loadStackConfig, stackConfigPath, type StackConfig } from "../../../orchestrator/config";
import { newEntry } from "../../../orchestrator/core/plan";
import { placeNewNode, programInputFor } from "../../../orchestrator/config/program-input";
import { shellcheck } from "../kubeadm/shell";
import { DYNAMIC, JOIN, clientKey, fixtures, installMocks, one, reveal, settle, value, type Recorder } from "./harness";

const repo = [process.cwd(), join(__dirname, "..", "..", "..", "..")].find((r) =>
  existsSync(join(r, "stacks", "Pulumi.lab.yaml")),
)!;
const example = (p: string) =>
  (parse(readFileSync(join(repo, "stacks", `Pulumi.${p}.yaml`), "utf8")) as { config: Record<string, unknown> }).config;

const AVSET = "azure-native:compute:AvailabilitySet";
const VM = "azure-native:compute:VirtualMachine";
const rotated = new Map<string, string>();

/** What the mocked clouds answer; a bootstrap command reports the host key it rotated to. */
function cloudState(type: string, name: string, inputs: Record<string, unknown>): Record<string, unknown> {
  if (type.endsWith("molt:SshKeyPair")) return generateSshKeyPair(name);
  if (type === DYNAMIC && inputs.rotateHostKey) {
    const key = generateSshKeyPair(`${name}-rotated`).publicKey;
    rotated.set(name, key);
    return { hostKey: key };
  }
  if (type === "aws:ec2/instance:Instance")
    return { privateIp: "10.0.0.11", availabilityZone: inputs.availabilityZone };
  if (type === "azure-native:network:NetworkInterface")
    return { ipConfigurations: [{ privateIPAddress: "10.0.0.12" }] };
  if (type === VM) return { vmId: `${name}-vmid` };
  if (type === AVSET) return { id: "/subscriptions/s/availabilitySets/cp" };
  if (type === VSPHERE_TOKENS.virtualMachine) return { uuid: `${name}-uuid`, defaultIpAddress: "10.0.0.13" };
  return {};
}
const lookups = (token: string, inputs: Record<string, unknown>): Record<string, unknown> =>
  token === VSPHERE_TOKENS.getVirtualMachine
    ? {
        id: "tmpl",
        guestId: "ubuntu64Guest",
        scsiType: "pvscsi",
        firmware: "efi",
        disks: [{ label: "d", size: 20, thinProvisioned: true, eagerlyScrub: false }],
        networkInterfaceTypes: ["vmxnet3"],
      }
    : { id: `${token.split(":").pop()}:${String(inputs.name)}` };

describe("cloud fixes of issue #16 (mocks)", () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), "molt-clouds-"));
    mkdirSync(join(dir, "stacks"));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const configOf = (provider: string, edit: (c: Record<string, unknown>) => void = () => {}): StackConfig => {
    const c = structuredClone(example(provider));
    edit(c);
    writeFileSync(stackConfigPath(dir, provider), stringify({ config: c }));
    return loadStackConfig(dir, provider);
  };
  const entries = (cfg: StackConfig, count: number): NodeEntry[] => {
    const nodes: NodeEntry[] = [];
    for (let i = 0; i < count; i++)
      nodes.push(
        placeNewNode(
          cfg,
          newEntry({ intent: cfg.intent, nodes, endpoints: [], orphans: [], expired: [] }, "p", i === 0),
          nodes,
        ),
      );
    return nodes;
  };
  const run = async (
    cfg: StackConfig,
    count = 3,
  ): Promise<{ rec: Recorder; molt: MoltOutputs; nodes: NodeEntry[] }> => {
    const rec = installMocks(cloudState, lookups);
    pulumi.runtime.setAllConfig(
      { "molt:ssh": JSON.stringify({ user: cfg.sshUser, privateKey: clientKey.privateKey }) },
      ["molt:ssh"],
    );
    const nodes = entries(cfg, count);
    const out = await buildProgram(programInputFor(cfg, nodes))();
    const molt = await value(out.molt as pulumi.Output<MoltOutputs>);
    await settle();
    return { rec, molt, nodes };
  };
  const bootstraps = (rec: Recorder) =>
    rec.resources
      .filter((r) => r.type === DYNAMIC && r.name.endsWith("-kubeadm"))
      .map((r) => ({ name: r.name, ...(reveal(r.inputs) as { create: string; rotateHostKey?: boolean }) }));

  describe("host keys", () => {
    it(
      "rotates every new node's host key over its first connection, and molt pins the rotated key from then " + "on",
      async () => {
        const { rec, molt, nodes } = await run(configOf("aws"));
        for (const b of bootstraps(rec)) assert.equal(b.rotateHostKey, true, b.name);
        assert.deepEqual(
          molt.endpoints.map((e) => e.hostPublicKey),
          nodes.map((n) => rotated.get(`${n.name}-kubeadm`)),
        );
        const seeds = rec.resources.filter((r) => r.type.endsWith("molt:KubeadmJoinMaterial"));
        for (const m of seeds)
          assert.equal(
            (reveal(m.inputs) as { seed: { hostKey: string } }).seed.hostKey,
            rotated.get(`${nodes[0].name}-kubeadm`),
            "joins reach the seed with its rotated key",
          );
      },
    );
  });

  describe("Azure", () => {
    it(
      "maps the endpoint's name to the local API server on every control-plane node (no hairpin), " +
        "shellcheck-clean",
      async () => {
        const { rec } = await run(configOf("azure"));
        for (const b of bootstraps(rec)) {
          assert.match(b.create, /readonly LOCAL_ENDPOINT_HOST='api\.prod\.example\.com'/, b.name);
          assert.equal(shellcheck(b.create), "", b.name);
        }
        const aws = await run(configOf("aws"));
        for (const b of bootstraps(aws.rec)) assert.match(b.create, /readonly LOCAL_ENDPOINT_HOST=''/);
      },
    );

    it("keeps a running zoneless VM out of a set it was made without (a VM joins a set only at creation)", async () => {
      const rec = installMocks(cloudState);
      const f = fixtures({ image: "Canonical:ubuntu-24_04-lts:server:24.04.202510010", failureDomain: undefined });
      const settings = { ...(example("azure")["molt:azure"] as AzureNodeSettings), zones: [] };
      const node = new AzureControlPlaneNode(
        f.node.name,
        {
          ...f,
          settings,
          availabilitySetId: "/subscriptions/s/availabilitySets/cp",
          joinMaterial: pulumi.secret(JOIN),
        },
        { transformations: [rec.transformation] },
      );
      await value(node.providerId);
      await settle();
      const opts = rec.transformed.find((t) => t.type === VM)?.opts;
      assert.deepEqual(opts?.ignoreChanges, ["osProfile", "availabilitySet"]);
    });

    it("puts the VMs of a region without zones into one availability set, and makes none with zones", async () => {
      const zoneless = configOf("azure", (c) => {
        (c["molt:azure"] as Record<string, unknown>).zones = [];
        (c["molt:azure"] as Record<string, unknown>).faultDomainCount = 3;
        c["molt:failureDomains"] = [];
      });
      const { rec } = await run(zoneless);
      const set = one(rec, AVSET);
      assert.equal(set.inputs.platformFaultDomainCount, 3);
      assert.deepEqual(set.inputs.sku, { name: "Aligned" });
      assert.equal(set.inputs.availabilitySetName, "prod-control-plane");
      const vms = rec.resources.filter((r) => r.type === VM);
      assert.equal(vms.length, 3);
      for (const vm of vms) {
        assert.deepEqual(vm.inputs.availabilitySet, { id: "control-plane-availability-set-set-id" });
        assert.deepEqual(vm.inputs.zones, []);
      }
      const zoned = await run(configOf("azure"));
      assert.equal(zoned.rec.resources.filter((r) => r.type === AVSET).length, 0);
      for (const vm of zoned.rec.resources.filter((r) => r.type === VM))
        assert.equal(vm.inputs.availabilitySet, undefined);
    });
  });

  describe("vSphere", () => {
    it("makes no DRS rule when anti-affinity is turned off (clusters without DRS)", async () => {
      const { rec } = await run(configOf("vsphere", (c) => (c["molt:vsphereAntiAffinity"] = { enabled: false })));
      assert.equal(rec.resources.filter((r) => r.type === VSPHERE_TOKENS.antiAffinityRule).length, 0);
      assert.equal(rec.resources.filter((r) => r.type === "molt:vsphere:ControlPlaneAntiAffinity").length, 0);
      const on = await run(configOf("vsphere"));
      assert.equal(on.rec.resources.filter((r) => r.type === VSPHERE_TOKENS.antiAffinityRule).length, 1);
    });

    it("keeps a VM on its pinned host with a DRS override (DRS off for that VM) only where asked", async () => {
      const { rec, nodes } = await run(
        configOf("vsphere", (c) => {
          const d = (c["molt:vsphere"] as { failureDomains: Record<string, Record<string, unknown>> }).failureDomains;
          d["rack-a"].keepOnHost = true;
        }),
      );
      const overrides = rec.resources.filter((r) => r.type === VSPHERE_TOKENS.drsVmOverride);
      const inRackA = nodes.filter((n) => n.failureDomain === "rack-a").map((n) => `${n.name}-drs-override`);
      assert.deepEqual(
        overrides.map((o) => o.name),
        inRackA,
      );
      assert.equal(overrides[0].inputs.drsEnabled, false);
      assert.equal(overrides[0].inputs.virtualMachineId, `${inRackA[0].replace(/-drs-override$/, "")}-uuid`);
    });
  });

  describe("AWS security group", () => {
    it(
      "allows all traffic between members (CNI included), the API from the NLB subnets, SSH on molt's " + "port",
      async () => {
        const rec = installMocks(() => ({}));
        const sg = new AwsControlPlaneSecurityGroup("prod-cp", {
          vpcId: "vpc-1",
          apiSourceCidrs: ["10.0.0.0/16"],
          loadBalancerSubnetCidrs: ["10.0.100.0/24", "10.0.101.0/24"],
          sshSourceCidrs: ["10.9.0.0/24"],
          sshPort: 2222,
        });
        await value(sg.id);
        await settle();
        const ingress = one(rec, "aws:ec2/securityGroup:SecurityGroup").inputs.ingress as Array<
          Record<string, unknown>
        >;
        assert.ok(ingress.some((r) => r.protocol === "-1" && r.self === true && r.fromPort === 0 && r.toPort === 0));
        assert.ok(
          ingress.some(
            (r) =>
              r.fromPort === 6443 &&
              JSON.stringify(r.cidrBlocks) === JSON.stringify(["10.0.100.0/24", "10.0.101.0/24"]),
          ),
        );
        assert.deepEqual(
          ingress.filter((r) => r.description === "SSH (molt)").map((r) => [r.fromPort, r.toPort, r.cidrBlocks]),
          [[2222, 2222, ["10.9.0.0/24"]]],
        );
        assert.ok(!ingress.some((r) => r.fromPort === 22), "no port 22 when molt uses 2222");
      },
    );
  });
});
