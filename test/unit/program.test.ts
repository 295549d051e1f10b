// The stack program (infra/program.ts) under Pulumi mocks, fed the way molt feeds it: the
// repository's example stacks loaded by orchestrator/config/index.ts, turned into program input
// by orchestrator/config/program-input.ts, node entries made by the planner and placed in
// failure domains. The lab branch is compared with a snapshot taken from the code before
// the clouds were wired in, so existing lab stacks see no diff.
import * as assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import * as pulumi from "@pulumi/pulumi";
import type { Stack } from "@pulumi/pulumi/automation";
import type { NodeEntry } from "../../orchestrator/core/nodes";
import { buildProgram, type MoltOutputs } from "../../infra/program";
import { VSPHERE_TOKENS } from "../../infra/providers/vsphere";
import { generateSshKeyPair } from "../../infra/remote/ssh";
import { loadStackConfig, type StackConfig } from "../../orchestrator/config";
import { readStoredState } from "../../orchestrator/stack/state";
import { newEntry } from "../../orchestrator/core/plan";
import { placeNewNode, programInputFor } from "../../orchestrator/config/program-input";
import { DYNAMIC, clientKey, installMocks, reveal, settle, type Recorder } from "./providers/harness";
import { LAB_NODES, LAB_SETTINGS, labTree } from "./program-tree";

// Compiled tests run from <outDir>/test/unit: find the repository root.
const repo = [process.cwd(), join(__dirname, "..", "..", "..")].find((r) =>
  existsSync(join(r, "stacks", "Pulumi.lab.yaml")),
)!;

/**
 * Taken with test/unit/program-tree.ts from infra/program.ts as of 73ebeeb (lab only); the
 * bootstrap commands changed on purpose since: they depend on the load-balancer attachment
 * (kubeadm needs the control-plane endpoint during init and join) and get LB_ENDPOINT and
 * CLUSTER_NAME.
 */
const LAB_SNAPSHOT: Record<string, string> = {
  "urn:pulumi:lab::molt::molt:lab:ControlPlaneNode$pulumi-nodejs:dynamic/molt:LabJoinMaterial::lab-cp-2-join":
    "454b4853c4c695f2",
  "urn:pulumi:lab::molt::molt:lab:ControlPlaneNode$pulumi-nodejs:dynamic/molt:LabJoinMaterial::lab-cp-3-join":
    "454b4853c4c695f2",
  "urn:pulumi:lab::molt::molt:lab:ControlPlaneNode$pulumi-nodejs:dynamic/molt:LabLbAttachment::lab-cp-1-lb":
    "4a6fc033210794e2",
  "urn:pulumi:lab::molt::molt:lab:ControlPlaneNode$pulumi-nodejs:dynamic/molt:LabLbAttachment::lab-cp-2-lb":
    "edf5c9c4dadbfd47",
  "urn:pulumi:lab::molt::molt:lab:ControlPlaneNode$pulumi-nodejs:dynamic/molt:LabLbAttachment::lab-cp-3-lb":
    "3705d4f4499aec5c",
  "urn:pulumi:lab::molt::molt:lab:ControlPlaneNode$pulumi-nodejs:dynamic/molt:LabMachine::lab-cp-1-machine":
    "0193a085c6bc875b",
  "urn:pulumi:lab::molt::molt:lab:ControlPlaneNode$pulumi-nodejs:dynamic/molt:LabMachine::lab-cp-2-machine":
    "cfc268d303384ff8",
  "urn:pulumi:lab::molt::molt:lab:ControlPlaneNode$pulumi-nodejs:dynamic/molt:LabMachine::lab-cp-3-machine":
    "14f4d89bbe43f292",
  "urn:pulumi:lab::molt::molt:lab:ControlPlaneNode$pulumi-nodejs:dynamic/molt:RemoteCommand::lab-cp-1-etcd":
    "e6abfd239a8adb10",
  "urn:pulumi:lab::molt::molt:lab:ControlPlaneNode$pulumi-nodejs:dynamic/molt:RemoteCommand::lab-cp-2-etcd":
    "6f9035f9457fac8a",
  "urn:pulumi:lab::molt::molt:lab:ControlPlaneNode$pulumi-nodejs:dynamic/molt:RemoteCommand::lab-cp-3-etcd":
    "bceaf60afcee039f",
  "urn:pulumi:lab::molt::molt:lab:ControlPlaneNode$pulumi-nodejs:dynamic/molt:SshKeyPair::lab-cp-1-hostkey":
    "13f94b43d04453d1",
  "urn:pulumi:lab::molt::molt:lab:ControlPlaneNode$pulumi-nodejs:dynamic/molt:SshKeyPair::lab-cp-2-hostkey":
    "0b4a158bc664634e",
  "urn:pulumi:lab::molt::molt:lab:ControlPlaneNode$pulumi-nodejs:dynamic/molt:SshKeyPair::lab-cp-3-hostkey":
    "ffe555f7bed6f5df",
  "urn:pulumi:lab::molt::molt:lab:ControlPlaneNode::lab-cp-1": "44136fa355b3678a",
  "urn:pulumi:lab::molt::molt:lab:ControlPlaneNode::lab-cp-2": "44136fa355b3678a",
  "urn:pulumi:lab::molt::molt:lab:ControlPlaneNode::lab-cp-3": "44136fa355b3678a",
  "urn:pulumi:lab::molt::pulumi-nodejs:dynamic/molt:LabLoadBalancer::api-lb": "933b4df103a42379",
  "urn:pulumi:lab::molt::pulumi-nodejs:dynamic/molt:SshKeyPair::ssh-client-key": "3ad1a4d8dd8e9fbd",
};

const JOIN_MATERIAL = "pulumi-nodejs:dynamic/molt:KubeadmJoinMaterial";
const HOST_KEY = "pulumi-nodejs:dynamic/molt:SshKeyPair";

const hostKeys = new Map<string, { privateKey: string; publicKey: string }>();
function hostKeyOf(name: string) {
  if (!hostKeys.has(name)) hostKeys.set(name, generateSshKeyPair(name));
  return hostKeys.get(name)!;
}
const addressOf = (name: string) => `10.0.0.${Number(/-(\d+)(-nic)?$/.exec(name)?.[1] ?? 99) + 10}`;

const cloudState = (type: string, name: string, inputs: Record<string, unknown>): Record<string, unknown> => {
  if (type === HOST_KEY) return hostKeyOf(name);
  if (type === "aws:ec2/instance:Instance")
    return { privateIp: addressOf(name), availabilityZone: inputs.availabilityZone };
  if (type === "azure-native:network:NetworkInterface")
    return { ipConfigurations: [{ privateIPAddress: addressOf(name) }] };
  if (type === "azure-native:compute:VirtualMachine") return { vmId: `${name}-vmid` };
  if (type === VSPHERE_TOKENS.virtualMachine) return { uuid: `${name}-uuid`, defaultIpAddress: addressOf(name) };
  return {};
};
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
    : { id: `${token}:${String(inputs.name)}` };

/** Node entries as a rollout makes them: the planner's newEntry, then placeNewNode. */
function rolloutEntries(cfg: StackConfig, stack: string, count: number): NodeEntry[] {
  const nodes: NodeEntry[] = [];
  for (let i = 0; i < count; i++) {
    const entry = newEntry({ intent: cfg.intent, nodes, endpoints: [], expired: [], orphans: [] }, stack, i === 0);
    nodes.push(placeNewNode(cfg, entry, nodes));
  }
  return nodes;
}

interface Run {
  rec: Recorder;
  molt: MoltOutputs;
  outputs: Record<string, unknown>;
}

/** Runs the program as the engine would, with molt:ssh (the client key) as secret config. */
async function run(cfg: StackConfig, nodes: NodeEntry[]): Promise<Run> {
  const rec = installMocks(cloudState, lookups);
  pulumi.runtime.setAllConfig({ "molt:ssh": JSON.stringify({ user: cfg.sshUser, privateKey: clientKey.privateKey }) }, [
    "molt:ssh",
  ]);
  const outputs = await buildProgram(programInputFor(cfg, nodes))();
  const molt = await new Promise<MoltOutputs>((resolve) => (outputs.molt as pulumi.Output<MoltOutputs>).apply(resolve));
  await settle();
  return { rec, molt, outputs };
}

/** The molt output through orchestrator/observe.ts's own validation of stored state. */
async function storedStateOf(stack: string, r: Run) {
  const key = r.outputs.sshPrivateKey as pulumi.Output<string>;
  const value = await new Promise<string>((resolve) => key.apply(resolve));
  const fake = {
    name: stack,
    outputs: async () => ({ molt: { value: r.molt, secret: false }, sshPrivateKey: { value, secret: true } }),
  };
  return readStoredState(fake as unknown as Stack);
}

const machineType = {
  aws: "aws:ec2/instance:Instance",
  azure: "azure-native:compute:VirtualMachine",
  vsphere: VSPHERE_TOKENS.virtualMachine,
} as const;
const domains = {
  aws: ["eu-central-1a", "eu-central-1b", "eu-central-1c"],
  azure: ["1", "2", "3"],
  vsphere: ["rack-a", "rack-b", "rack-c"],
} as const;

describe("the stack program (infra/program.ts)", () => {
  describe("adopted nodes (molt adopt)", () => {
    const adopted = (name: string, g: number, address: string): NodeEntry => ({
      name,
      image: "adopted",
      role: "control-plane",
      generation: g,
      init: false,
      adopted: {
        address,
        ssh: { host: address, port: 22, user: "ubuntu" },
        hostKey: hostKeyOf(name).publicKey,
        bastion: "ubuntu@203.0.113.7:22",
        etcdVersion: "3.5.35",
        source: "kubeone",
      },
    });
    const cfg = (): StackConfig => ({
      ...loadStackConfig(repo, "lab"),
      sshAccess: {
        agent: true,
        bastion: { host: "203.0.113.7", port: 22, user: "ubuntu", hostKey: hostKeyOf("b").publicKey, agent: true },
      },
    });
    const labCfg = (): StackConfig => {
      const c = cfg();
      return { ...c, lab: { ...c.lab!, isolated: true, loadBalancer: { lab: "foreign", address: "10.0.1.5:6443" } } };
    };
    const entries = [adopted("k1-cp-0", 1, "10.0.1.10"), adopted("k1-cp-1", 2, "10.0.1.11")];

    const imported = (e: NodeEntry, importId: string): NodeEntry => ({
      ...e,
      adopted: { ...e.adopted!, machine: { importId } },
    });

    it("takes a lab machine named with --import into the stack (found and checked, never made)", async () => {
      const r = await run(labCfg(), [imported(entries[0], "k1-cp-0-vm"), entries[1]]);
      const machines = r.rec.resources.filter((x) => x.type === "pulumi-nodejs:dynamic/molt:LabImportedMachine");
      assert.deepEqual(
        machines.map((m) => [m.name, m.inputs.name, m.inputs.hostPublicKey]),
        [["k1-cp-0-machine", "k1-cp-0-vm", hostKeyOf("k1-cp-0").publicKey]],
        "one machine, for the imported node only, pinned to the key adoption saw",
      );
      assert.ok(!r.rec.resources.some((x) => x.type === "pulumi-nodejs:dynamic/molt:LabMachine"), "nothing is made");
      const stored = await storedStateOf("lab", r);
      assert.deepEqual(stored.nodes[0].adopted?.machine, { importId: "k1-cp-0-vm" }, "observe.ts reads it back");
    });

    for (const [provider, type, id, extra] of [
      ["aws", "aws:ec2/instance:Instance", "i-0123456789abcdef0", {}],
      [
        "azure",
        "azure-native:compute:VirtualMachine",
        "/subscriptions/s1/resourceGroups/kubeone-rg/providers/Microsoft.Compute/virtualMachines/cp-0",
        { resourceGroupName: "kubeone-rg", vmName: "cp-0" },
      ],
      ["vsphere", "vsphere:index/virtualMachine:VirtualMachine", "/dc1/vm/kubeone/cp-0", {}],
    ] as const) {
      it(
        `asks the engine to import an adopted node's ${provider} machine named with --import, and nothing ` + `else`,
        async () => {
          const c = { ...loadStackConfig(repo, provider), sshAccess: cfg().sshAccess };
          const r = await run(c, [imported(entries[0], id), entries[1]]);
          const machines = r.rec.resources.filter((x) => x.type === type);
          assert.equal(machines.length, 1, machines.map((m) => m.name).join(", "));
          assert.equal(machines[0].name, "k1-cp-0-machine");
          assert.equal(machines[0].importId, id, "declared with the import option");
          assert.deepEqual(machines[0].inputs, extra, "no input of molt's beyond what names the machine");
          assert.ok(!r.rec.resources.some((x) => x.type === DYNAMIC), "no bootstrap, no teardown script");
        },
      );
    }

    it("makes no machine for an adopted node, only its record; its endpoint is what adoption recorded", async () => {
      const r = await run(labCfg(), entries);
      const types = r.rec.resources.map((x) => x.type);
      assert.ok(!types.some((t) => /LabMachine|ControlPlaneNode|RemoteCommand/.test(t)), types.join(", "));
      assert.equal(types.filter((t) => t === "pulumi-nodejs:dynamic/molt:AdoptedNode").length, 2);
      assert.ok(!types.some((t) => /LabLoadBalancer/.test(t)), "the cluster's own load balancer is used");
      assert.deepEqual(r.molt.nodes, entries);
      assert.deepEqual(r.molt.endpoints[0], {
        name: "k1-cp-0",
        privateAddress: "10.0.1.10",
        sshHost: "10.0.1.10",
        sshPort: 22,
        hostPublicKey: hostKeyOf("k1-cp-0").publicKey,
        providerId: "adopted://k1-cp-0",
        sshUser: "ubuntu",
      });
      assert.equal(r.molt.apiEndpoint, "10.0.1.5:6443");
      assert.deepEqual((await storedStateOf("lab", r)).nodes, entries, "observe.ts reads adopted entries back");
    });

    it(
      "joins a new lab node through the oldest adopted node, through the bastion, attached to the named " + "LB",
      async () => {
        const c = labCfg();
        const fresh = newEntry(
          { intent: c.intent, nodes: entries, endpoints: [], expired: [], orphans: [] },
          "lab",
          false,
        );
        assert.equal(fresh.generation, 3, "after the adopted generations");
        const r = await run(c, [...entries, fresh]);
        const material = r.rec.resources.find((x) => x.type === "pulumi-nodejs:dynamic/molt:LabJoinMaterial")!;
        const seed = reveal(material.inputs.seed) as Record<string, unknown>;
        assert.equal(seed.host, "10.0.1.10");
        assert.equal(seed.user, "ubuntu");
        assert.equal(seed.agent, true);
        assert.equal((seed.bastion as { host: string }).host, "203.0.113.7");
        const machine = r.rec.resources.find((x) => x.type === "pulumi-nodejs:dynamic/molt:LabMachine")!;
        assert.equal(machine.inputs.isolated, true);
        const lb = reveal(
          r.rec.resources.find((x) => x.type === "pulumi-nodejs:dynamic/molt:LabLbAttachment")!.inputs.lb,
        ) as Record<string, unknown>;
        assert.deepEqual([lb.lab, lb.port, lb.bind], ["foreign", 6443, "10.0.1.5"]);
        const bootstrap = reveal(r.rec.resources.find((x) => x.type === DYNAMIC)!.inputs) as {
          environment: Record<string, string>;
          connection: { bastion: { host: string } };
        };
        assert.equal(bootstrap.environment.LB_ENDPOINT, "10.0.1.5:6443");
        assert.equal(bootstrap.environment.JOIN_ENDPOINTS, "https://10.0.1.10:2379,https://10.0.1.11:2379");
        assert.equal(bootstrap.connection.bastion.host, "203.0.113.7");
      },
    );
  });

  describe("lab", () => {
    it("builds exactly the resources, URNs and inputs it should (a change here changes every lab stack)", async () => {
      const tree = await labTree(buildProgram);
      assert.deepEqual(tree.resources, LAB_SNAPSHOT);
    });

    it("gets the same input from programInputFor as rollout and inspect built inline", () => {
      const saved = process.env.MOLT_LAB_ROOT;
      delete process.env.MOLT_LAB_ROOT;
      try {
        const cfg = loadStackConfig(repo, "lab");
        assert.deepEqual(programInputFor(cfg, LAB_NODES), {
          provider: "lab",
          nodes: LAB_NODES,
          sshUser: "root",
          lab: LAB_SETTINGS,
          joinDeadlineSeconds: 300,
        });
      } finally {
        if (saved !== undefined) process.env.MOLT_LAB_ROOT = saved;
      }
    });
  });

  for (const provider of ["aws", "azure", "vsphere"] as const) {
    describe(`stacks/Pulumi.${provider}.yaml`, () => {
      const cfg = loadStackConfig(repo, provider);
      const nodes = rolloutEntries(cfg, provider, 3);
      const names = nodes.map((n) => n.name);
      let r: Run;
      before(async () => {
        r = await run(cfg, nodes);
      });

      it("places the three nodes in three different failure domains, stored in their entries", () => {
        assert.deepEqual(
          nodes.map((n) => n.failureDomain),
          domains[provider],
        );
        assert.deepEqual(r.molt.nodes, nodes);
      });

      it("builds one control-plane node, machine, pinned host key and kubeadm command per node", () => {
        const of = (type: string) =>
          r.rec.resources
            .filter((x) => x.type === type)
            .map((x) => x.name)
            .sort();
        assert.deepEqual(of(`molt:${provider}:ControlPlaneNode`), names);
        assert.deepEqual(of(machineType[provider]), names);
        assert.deepEqual(
          of(HOST_KEY),
          names.map((n) => `${n}-hostkey`),
          "one host key per node, and no generated client key",
        );
        assert.deepEqual(
          of(DYNAMIC),
          names.map((n) => `${n}-kubeadm`),
        );
      });

      it(
        "initialises the first node and joins the others through the oldest node, each bootstrap pinned to its own " +
          "host key",
        () => {
          const bootstrap = (n: string) =>
            reveal(r.rec.resources.find((x) => x.type === DYNAMIC && x.name === `${n}-kubeadm`)!.inputs) as {
              create: string;
              stdin?: string;
              connection: { hostKey: string; user: string; privateKey: string };
            };
          const [first, ...joining] = names;
          assert.match(bootstrap(first).create, /kubeadm init/);
          assert.equal(bootstrap(first).stdin, undefined);
          for (const n of joining) {
            assert.match(bootstrap(n).create, /kubeadm join/);
            assert.ok(bootstrap(n).stdin, `${n} gets join material on stdin`);
          }
          for (const n of names) {
            assert.equal(bootstrap(n).connection.hostKey, hostKeyOf(`${n}-hostkey`).publicKey);
            assert.equal(bootstrap(n).connection.user, cfg.sshUser);
            assert.equal(bootstrap(n).connection.privateKey, clientKey.privateKey);
          }
          const material = r.rec.resources.filter((x) => x.type === JOIN_MATERIAL);
          assert.deepEqual(
            material.map((m) => m.name).sort(),
            joining.map((n) => `${n}-kubeadm-join-material`),
          );
          for (const m of material) {
            const seed = (reveal(m.inputs) as { seed: { host: string; hostKey: string } }).seed;
            assert.deepEqual(
              [seed.host, seed.hostKey],
              [addressOf(first), hostKeyOf(`${first}-hostkey`).publicKey],
              `${m.name} is obtained from ${first}`,
            );
          }
        },
      );

      it(
        provider === "vsphere"
          ? "adds one DRS anti-affinity rule, over all nodes"
          : "adds no DRS anti-affinity rule (vSphere only)",
        () => {
          const rules = r.rec.resources.filter((x) => x.type === VSPHERE_TOKENS.antiAffinityRule);
          const groups = r.rec.resources.filter((x) => x.type === "molt:vsphere:ControlPlaneAntiAffinity");
          assert.equal(rules.length, provider === "vsphere" ? 1 : 0);
          assert.equal(groups.length, provider === "vsphere" ? 1 : 0);
          if (provider === "vsphere")
            assert.deepEqual(
              rules[0].inputs.virtualMachineIds,
              names.map((n) => `${n}-uuid`),
            );
        },
      );

      it(
        "exports the molt output that observe.ts reads back: nodes, endpoints, the SSH user and key, the API " +
          "endpoint",
        async () => {
          const stored = await storedStateOf(provider, r);
          assert.deepEqual(stored.nodes, nodes);
          assert.deepEqual(
            stored.endpoints.map((e) => [e.name, e.privateAddress, e.sshHost, e.sshPort, e.hostPublicKey]),
            names.map((n) => [n, addressOf(n), addressOf(n), 22, hostKeyOf(`${n}-hostkey`).publicKey]),
          );
          for (const e of stored.endpoints) assert.match(e.providerId, new RegExp(`^${provider}://`));
          assert.equal(stored.sshUser, cfg.sshUser);
          assert.equal(stored.sshPrivateKey, clientKey.privateKey);
          assert.equal(stored.apiEndpoint, cfg.cloud!.bootstrap.controlPlaneEndpoint);
          assert.ok(
            await (r.outputs.sshPrivateKey as unknown as { isSecret: Promise<boolean> }).isSecret,
            "the client key is exported as a secret",
          );
        },
      );
    });
  }

  describe("node lists a rollout goes through", () => {
    const cfg = loadStackConfig(repo, "aws");

    it("places a surge node where the fewest up-to-date nodes are, and never moves an existing node", () => {
      const old = rolloutEntries(cfg, "aws", 3);
      const v2: StackConfig = { ...cfg, intent: { ...cfg.intent, image: "ami-0fedcba9876543210" } };
      const first = placeNewNode(
        v2,
        newEntry({ intent: v2.intent, nodes: old, endpoints: [], expired: [], orphans: [] }, "aws", false),
        old,
      );
      assert.equal(first.failureDomain, "eu-central-1a");
      // The oldest node (1a) retired; the next new node goes to a zone without a new one.
      const after = [...old.slice(1), first];
      const second = placeNewNode(
        v2,
        newEntry({ intent: v2.intent, nodes: after, endpoints: [], expired: [], orphans: [] }, "aws", false),
        after,
      );
      assert.equal(second.failureDomain, "eu-central-1b");
      assert.deepEqual(placeNewNode(v2, first, after), first, "an entry that has a domain keeps it");
    });

    it("keeps a lone survivor of a 1-replica roll without asking for join material", async () => {
      const [, survivor] = rolloutEntries(cfg, "aws", 2);
      const r = await run(cfg, [survivor]);
      assert.equal(r.rec.resources.filter((x) => x.type === JOIN_MATERIAL).length, 0);
      assert.equal(
        (reveal(r.rec.resources.find((x) => x.type === DYNAMIC)!.inputs) as { stdin?: string }).stdin,
        undefined,
      );
    });

    it("refuses a node without a failure domain when several are configured", async () => {
      const [entry] = rolloutEntries(cfg, "aws", 1);
      const { failureDomain: _, ...unplaced } = entry;
      installMocks(cloudState, lookups);
      pulumi.runtime.setAllConfig(
        { "molt:ssh": JSON.stringify({ user: "ubuntu", privateKey: clientKey.privateKey }) },
        ["molt:ssh"],
      );
      await assert.rejects(
        buildProgram(programInputFor(cfg, [unplaced]))(),
        /has no failureDomain, but subnet is configured for several/,
      );
    });
  });
});
