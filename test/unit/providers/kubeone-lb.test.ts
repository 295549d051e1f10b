// A KubeOne cluster's API load balancer under Pulumi's mocks, fed what `molt adopt` is fed:
// KubeOne's `terraform output -json` (test/fixtures/kubeone, shaped like its examples/terraform
// aws and azure outputs), what the probe reads on each host (its cloud identity, the kubelet's
// --cloud-provider) and the stack's settings. AWS: a classic ELB by name (aws_elb.control_plane),
// Azure: the azurerm_lb backend pool. Adopted nodes are declared in it when recorded and taken
// out by the update that retires them; molt's own nodes join it; adoption refuses a load
// balancer that does not serve controlPlaneEndpoint or does not hold the adopted nodes.
import * as assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { parse, stringify } from "yaml";
import type { NodeEntry } from "../../../orchestrator/core/nodes";
import { buildProgram, type MoltOutputs } from "../../../infra/program";
import { ENDPOINT_CHECK_MARKER, type EndpointCheck } from "../../../infra/providers/api-load-balancer";
import { cloudProviderOf } from "../../../infra/providers/registry";
import { generateSshKeyPair } from "../../../infra/remote/ssh";
import { parseKubeOneOutput, type AdoptionInput } from "../../../orchestrator/adopt";
import { machineIdentities } from "../../../orchestrator/adopt/cloud-checks";
import { parseGetent } from "../../../orchestrator/adopt/endpoint";
import type { EtcdView } from "../../../orchestrator/adopt/etcd-checks";
import type { EndpointStatus } from "../../../orchestrator/core/observations";
import type { AdoptionHost } from "../../../orchestrator/adopt/input";
import { parseProbe, type HostFacts } from "../../../orchestrator/adopt/probe";
import { adoptedEntries } from "../../../orchestrator/adopt/record";
import { loadStackConfig, type StackConfig } from "../../../orchestrator/config";
import { newEntry } from "../../../orchestrator/core/plan";
import { placeNewNode, programInputFor } from "../../../orchestrator/config/program-input";
import { targetsFor } from "../../../orchestrator/stack/targets";
import { DYNAMIC, clientKey, installMocks, settle, type Recorder } from "./harness";

const repo = [process.cwd(), join(__dirname, "..", "..", "..", "..")].find((r) =>
  existsSync(join(r, "stacks", "Pulumi.lab.yaml")),
)!;
const fixture = (name: string) => readFileSync(join(repo, "test", "fixtures", "kubeone", name), "utf8");
const example = (provider: string) =>
  (parse(readFileSync(join(repo, "stacks", `Pulumi.${provider}.yaml`), "utf8")) as { config: Record<string, unknown> })
    .config;

/** A stack file in a scratch project: the example of `provider` with `edit` applied. */
function stackConfig(provider: string, edit: (c: Record<string, Record<string, unknown>>) => void): StackConfig {
  const dir = mkdtempSync(join(tmpdir(), "molt-kubeone-lb-"));
  try {
    mkdirSync(join(dir, "stacks"));
    const c = structuredClone(example(provider)) as Record<string, Record<string, unknown>>;
    edit(c);
    writeFileSync(join(dir, "stacks", "Pulumi.kubeone.yaml"), stringify({ config: c }));
    return loadStackConfig(dir, "kubeone");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** What `molt adopt` records for the hosts (adoptedEntries), given what the probe read on each. */
function adopt(input: AdoptionInput, cfg: StackConfig, probe: (h: AdoptionHost, i: number) => string): NodeEntry[] {
  const facts = new Map<AdoptionHost, HostFacts>(input.hosts.map((h, i) => [h, parseProbe(probe(h, i))]));
  const identities = machineIdentities(input.hosts, facts, new Map(), true);
  assert.deepEqual(identities.problems, []);
  const byHost: EtcdView["byHost"] = new Map(
    input.hosts.map((h, i) => [
      h,
      {
        member: { id: String(100 + i), name: h.hostname!, peerURLs: [], clientURLs: [], isLearner: false },
        status: { version: "3.5.21" } as EndpointStatus,
      },
    ]),
  );
  const etcd = { members: [], leader: "102", byHost, status: new Map(), alarms: [] } as EtcdView;
  const seen = new Map(input.hosts.map((h) => [h, generateSshKeyPair(h.address).publicKey]));
  return adoptedEntries(input, etcd, seen, {}, cfg, undefined, new Map(), identities.providerIds);
}

const addressOf = (name: string) => `172.31.40.${10 + (Number(/(\d+)$/.exec(name)?.[1]) || 0)}`;
const cloudState = (type: string, name: string, inputs: Record<string, unknown>): Record<string, unknown> => {
  if (type === "pulumi-nodejs:dynamic/molt:SshKeyPair") return generateSshKeyPair(name);
  if (type === "aws:ec2/instance:Instance")
    return { privateIp: addressOf(name), availabilityZone: inputs.availabilityZone };
  if (type === "azure-native:network:NetworkInterface")
    return { ipConfigurations: [{ privateIPAddress: addressOf(name) }] };
  if (type === "azure-native:compute:VirtualMachine") return { vmId: `${name}-vmid` };
  return {};
};

interface Run {
  rec: Recorder;
  /** The `molt` output: rejects when the program fails (the endpoint check). */
  molt: Promise<MoltOutputs>;
}

async function run(
  cfg: StackConfig,
  nodes: NodeEntry[],
  invoke: (token: string, inputs: Record<string, unknown>) => Record<string, unknown>,
  endpointCheck?: EndpointCheck,
): Promise<Run> {
  const rec = installMocks(cloudState, invoke);
  pulumi.runtime.setAllConfig({ "molt:ssh": JSON.stringify({ user: cfg.sshUser, privateKey: clientKey.privateKey }) }, [
    "molt:ssh",
  ]);
  const input = programInputFor(cfg, nodes);
  const outputs = await buildProgram(endpointCheck && input.provider !== "lab" ? { ...input, endpointCheck } : input)();
  const molt = (outputs.molt as unknown as { promise(): Promise<MoltOutputs> }).promise();
  await molt.catch(() => undefined);
  await settle();
  return { rec, molt };
}

const byType = (rec: Recorder, type: string) => rec.resources.filter((r) => r.type === type);
/** What a retirement's targeted update deletes of `node`: its resources in the state (stack/targets.ts). */
function retiredWith(rec: Recorder, node: string, names: string[]): string[] {
  const state = rec.resources.map((r) => ({ urn: `urn:pulumi:test::molt::${r.type}::${r.name}`, type: r.type }));
  return targetsFor(state, node, names)!
    .nodeResources.map((u) => u.slice(u.lastIndexOf("::") + 2))
    .sort();
}

describe("KubeOne's AWS classic ELB (aws_elb.control_plane) under mocks", () => {
  const input = parseKubeOneOutput(fixture("aws-terraform-output.json"));
  const elbDns = "kubeone-api-lb-1529814937.eu-central-1.elb.amazonaws.com";
  const instanceOf = (i: number) => `i-0${i}a1b2c3d4e5f6a7b`;
  const zones = ["eu-central-1a", "eu-central-1b", "eu-central-1c"];
  const cfg = stackConfig("aws", (c) => {
    c["molt:aws"].loadBalancer = { classicElb: "kubeone-api-lb" };
    c["molt:bootstrap"].controlPlaneEndpoint = input.apiEndpoint;
    c["molt:bootstrap"].clusterName = "kubeone";
    c["molt:bootstrap"].cloudProvider = "external";
    c["molt:aws"].clusterTag = "shared";
  });
  // IMDSv2 answered on every host; KubeOne's kubelets run with --cloud-provider=external.
  const entries = adopt(input, cfg, (h, i) =>
    [
      `hostname=${h.hostname}`,
      `kubelet-cloud-provider=external`,
      `aws-instance-id=${instanceOf(i)}`,
      `aws-zone=${zones[i]}`,
    ].join("\n"),
  );
  const endpointCheck: EndpointCheck = {
    endpoint: input.apiEndpoint!,
    resolved: parseGetent(`3.120.7.1       STREAM ${elbDns}\n3.120.7.1       DGRAM  \n18.194.3.2      STREAM\n`),
    resolvedOn: "172.31.10.11",
  };
  const elb =
    (over: Record<string, unknown> = {}) =>
    (token: string, inputs: Record<string, unknown>) =>
      token === "aws:elb/getLoadBalancer:getLoadBalancer"
        ? { name: inputs.name, dnsName: elbDns, instances: [0, 1, 2].map(instanceOf), ...over }
        : {};

  it("records each adopted host's instance as the AWS cloud controller names it (from IMDS)", () => {
    assert.deepEqual(
      entries.map((e) => [e.name, e.adopted?.providerId]),
      [0, 1, 2].map((i) => [input.hosts[i].hostname, `aws:///${zones[i]}/${instanceOf(i)}`]),
    );
  });

  it(
    "declares every adopted instance in the classic ELB by name when " +
      "recording (registering it again changes nothing)",
    async () => {
      const r = await run(cfg, entries, elb(), endpointCheck);
      assert.equal((await r.molt).nodes.length, 3);
      const attached = byType(r.rec, "aws:elb/attachment:Attachment").map((a) => [
        a.name,
        a.inputs.elb,
        a.inputs.instance,
      ]);
      assert.deepEqual(
        attached,
        entries.map((e, i) => [`${e.name}-api`, "kubeone-api-lb", instanceOf(i)]),
      );
      assert.equal(byType(r.rec, "aws:lb/targetGroupAttachment:TargetGroupAttachment").length, 0);
      assert.deepEqual(
        r.rec.invokes.filter((i) => i.token === "aws:elb/getLoadBalancer:getLoadBalancer").map((i) => i.inputs.name),
        ["kubeone-api-lb"],
        "the ELB is described by AWS, by its name",
      );
    },
  );

  it(
    "retiring an adopted node deregisters it: its attachment is the " +
      "retiring update's to delete, and is declared no more",
    async () => {
      const names = entries.map((e) => e.name);
      const before = await run(cfg, entries, elb());
      assert.deepEqual(retiredWith(before.rec, names[0], names), [names[0], `${names[0]}-api`]);
      const after = await run(cfg, entries.slice(1), elb());
      assert.deepEqual(
        byType(after.rec, "aws:elb/attachment:Attachment").map((a) => a.name),
        names.slice(1).map((n) => `${n}-api`),
      );
      assert.equal(
        cloudProviderOf("aws")!.adoptedRelease(entries[0], cfg.cloud!),
        "deregistered from classic ELB kubeone-api-lb",
      );
    },
  );

  it("says so, instead of claiming it, for a node adopted before molt recorded its instance", () => {
    const old = { ...entries[0], adopted: { ...entries[0].adopted!, providerId: undefined } };
    assert.match(
      cloudProviderOf("aws")!.adoptedRelease(old, cfg.cloud!)!,
      /^left registered in classic ELB .*yourself/,
    );
  });

  it(
    "registers molt's own new node in the classic ELB, with the " + "cluster tag and the kubelet's CCM settings",
    async () => {
      const fresh = placeNewNode(
        cfg,
        newEntry({ intent: cfg.intent, nodes: entries, endpoints: [], expired: [], orphans: [] }, "kubeone", false),
        entries,
      );
      const r = await run(cfg, [...entries, fresh], elb());
      const mine = byType(r.rec, "aws:elb/attachment:Attachment").find((a) => a.name === `${fresh.name}-api`)!;
      assert.deepEqual([mine.inputs.elb, mine.inputs.instance], ["kubeone-api-lb", `${fresh.name}-id`]);
      assert.deepEqual(
        retiredWith(
          r.rec,
          fresh.name,
          [...entries, fresh].map((e) => e.name),
        ).includes(`${fresh.name}-api`),
        true,
      );
      const instance = byType(r.rec, "aws:ec2/instance:Instance")[0].inputs;
      assert.equal((instance.tags as Record<string, string>)["kubernetes.io/cluster/kubeone"], "shared");
      const script = String(
        r.rec.resources.find((x) => x.type === DYNAMIC && x.name === `${fresh.name}-kubeadm`)!.inputs.create,
      );
      assert.match(script, /kubeletExtraArgs:\n\s+- name: cloud-provider\n\s+value: external/);
      assert.match(script, new RegExp(`providerID: aws:///${fresh.failureDomain}/${fresh.name}-id`));
    },
  );

  it(
    "adoption goes on when the ELB serves the endpoint (by its DNS " + "name, or a CNAME to it) and holds every node",
    async () => {
      await (
        await run(cfg, entries, elb(), endpointCheck)
      ).molt;
      const cname: EndpointCheck = {
        endpoint: "api.kubeone.example.com:6443",
        resolved: parseGetent(`3.120.7.1       STREAM ${elbDns}\n`),
        resolvedOn: "172.31.10.11",
      };
      await (
        await run(cfg, entries, elb(), cname)
      ).molt;
    },
  );

  it("adoption is refused when the named ELB is another one than the endpoint's", async () => {
    const other = await run(
      cfg,
      entries,
      elb({ dnsName: "other-api-lb-42.eu-central-1.elb.amazonaws.com" }),
      // The node resolved the endpoint to nothing: no address of the other ELB's can be it.
      { ...endpointCheck, resolved: { addresses: [] } },
    );
    await assert.rejects(other.molt, (e: Error) => {
      assert.ok(e.message.startsWith(ENDPOINT_CHECK_MARKER), e.message);
      assert.match(
        e.message,
        /controlPlaneEndpoint kubeone-api-lb-1529814937[^ ]*:6443 \(kubeadm-config\) is not served by classic ELB kubeone-api-lb \(other-api-lb-42/,
      );
      return true;
    });
  });

  it("adoption is refused when an adopted instance is not in the ELB", async () => {
    const r = await run(cfg, entries, elb({ instances: [instanceOf(0), instanceOf(2)] }), endpointCheck);
    await assert.rejects(
      r.molt,
      new RegExp(`${entries[1].name}'s machine is not a member of classic ELB kubeone-api-lb`),
    );
  });
});

describe("KubeOne's Azure load balancer backend pool (azurerm_lb, ApiServers) under mocks", () => {
  const input = parseKubeOneOutput(fixture("azure-terraform-output.json"));
  const rg = "/subscriptions/s1/resourceGroups/kubeone-rg/providers";
  const pool = `${rg}/Microsoft.Network/loadBalancers/kubernetes/backendAddressPools/ApiServers`;
  const vmOf = (i: number) => `${rg}/Microsoft.Compute/virtualMachines/kubeone-cp-${i}`;
  const nicOf = (i: number) => `${rg}/Microsoft.Network/networkInterfaces/kubeone-cp-${i}`;
  // KubeOne's endpoint is the LB's public address; molt's Azure stacks name the endpoint by a
  // DNS name (the no-hairpin mapping needs one), here the public IP's own.
  const cfg = stackConfig("azure", (c) => {
    c["molt:azure"].apiBackendPoolId = pool;
    c["molt:bootstrap"].controlPlaneEndpoint = "kubeone-api.westeurope.cloudapp.azure.com:6443";
  });
  const entries = adopt(input, cfg, (h, i) => [`hostname=${h.hostname}`, `azure-vm=${vmOf(i)}`].join("\n"));
  const azure =
    (members = [0, 1, 2]) =>
    (token: string, inputs: Record<string, unknown>): Record<string, unknown> => {
      if (token === "azure-native:network:getLoadBalancer")
        return {
          frontendIPConfigurations: [
            { name: "KubeApi", publicIPAddress: { id: `${rg}/Microsoft.Network/publicIPAddresses/kubeone-lbip` } },
          ],
        };
      if (token === "azure-native:network:getPublicIPAddress")
        return { ipAddress: "20.79.14.201", dnsSettings: { fqdn: "kubeone-api.westeurope.cloudapp.azure.com" } };
      if (token === "azure-native:network:getLoadBalancerBackendAddressPool")
        return {
          backendIPConfigurations: members.map((i) => ({ id: `${nicOf(i)}/ipConfigurations/kubeone-cp-${i}` })),
        };
      if (token === "azure-native:compute:getVirtualMachine") {
        const i = Number(/(\d+)$/.exec(String(inputs.vmName))![1]);
        return { networkProfile: { networkInterfaces: [{ id: nicOf(i) }] } };
      }
      return {};
    };
  const check = (endpoint: string, addresses: string[] = []): EndpointCheck => ({
    endpoint,
    resolved: { addresses },
    resolvedOn: "172.16.1.4",
  });
  const MEMBERSHIP = "pulumi-nodejs:dynamic/molt:AzureBackendPoolMembership";

  it("records each adopted VM by its resource id (from the instance metadata service)", () => {
    assert.deepEqual(
      entries.map((e) => e.adopted?.providerId),
      [0, 1, 2].map((i) => `azure://${vmOf(i)}`),
    );
  });

  it(
    "declares every adopted VM's membership of the backend pool " + "when recording, and takes it out on retirement",
    async () => {
      const r = await run(cfg, entries, azure(), check(input.apiEndpoint!));
      await r.molt;
      assert.deepEqual(
        byType(r.rec, MEMBERSHIP).map((m) => [m.name, m.inputs.vmId, m.inputs.backendPoolId]),
        entries.map((e, i) => [`${e.name}-api`, vmOf(i), pool]),
      );
      const names = entries.map((e) => e.name);
      assert.deepEqual(retiredWith(r.rec, names[0], names), [names[0], `${names[0]}-api`]);
      const after = await run(cfg, entries.slice(1), azure());
      assert.deepEqual(
        byType(after.rec, MEMBERSHIP).map((m) => m.name),
        names.slice(1).map((n) => `${n}-api`),
      );
      assert.equal(
        cloudProviderOf("azure")!.adoptedRelease(entries[0], cfg.cloud!),
        "taken out of the API backend pool",
      );
    },
  );

  it("puts molt's own new node's NIC in the same pool, its providerID in the kubelet configuration", async () => {
    const fresh = placeNewNode(
      cfg,
      newEntry({ intent: cfg.intent, nodes: entries, endpoints: [], expired: [], orphans: [] }, "kubeone", false),
      entries,
    );
    const r = await run(cfg, [...entries, fresh], azure());
    const nic = byType(r.rec, "azure-native:network:NetworkInterface")[0].inputs;
    const ip = (nic.ipConfigurations as Array<Record<string, unknown>>)[0];
    assert.deepEqual(ip.loadBalancerBackendAddressPools, [{ id: pool }]);
    const script = String(
      r.rec.resources.find((x) => x.type === DYNAMIC && x.name === `${fresh.name}-kubeadm`)!.inputs.create,
    );
    // "azure://" + the VM's resource id (the mocks' ids are "<name>-id").
    assert.match(script, new RegExp(`providerID: azure://${fresh.name}-id`));
  });

  it(
    "adoption goes on when the endpoint is the frontend's " + "address, its DNS name, or a name for that address",
    async () => {
      for (const c of [
        check(input.apiEndpoint!),
        check("kubeone-api.westeurope.cloudapp.azure.com:6443"),
        check("api.kubeone.example.com:6443", ["20.79.14.201"]),
      ])
        await (
          await run(cfg, entries, azure(), c)
        ).molt;
    },
  );

  describe("the stack's endpoint is KubeOne's: the load balancer's public IP, no DNS label", () => {
    const ipCfg = stackConfig("azure", (c) => {
      c["molt:azure"].apiBackendPoolId = pool;
      c["molt:bootstrap"].controlPlaneEndpoint = input.apiEndpoint!;
    });
    const noLabel = (members?: number[]) => {
      const base = azure(members);
      return (token: string, inputs: Record<string, unknown>) =>
        token === "azure-native:network:getPublicIPAddress" ? { ipAddress: "20.79.14.201" } : base(token, inputs);
    };

    it("adoption goes on, and molt's new node reaches that address through the load balancer", async () => {
      assert.equal(input.apiEndpoint, "20.79.14.201:6443");
      await (
        await run(ipCfg, entries, noLabel(), check(input.apiEndpoint!))
      ).molt;
      const fresh = placeNewNode(
        ipCfg,
        newEntry({ intent: ipCfg.intent, nodes: entries, endpoints: [], expired: [], orphans: [] }, "kubeone", false),
        entries,
      );
      const r = await run(ipCfg, [...entries, fresh], noLabel());
      const script = String(
        r.rec.resources.find((x) => x.type === DYNAMIC && x.name === `${fresh.name}-kubeadm`)!.inputs.create,
      );
      // An address cannot be mapped in /etc/hosts; a public frontend takes the node's own flows back.
      assert.match(script, /readonly LOCAL_ENDPOINT_HOST=''/);
      const named = await run(cfg, [...entries, placeNewNode(cfg, fresh, entries)], azure());
      assert.match(
        String(
          named.rec.resources.find((x) => x.type === DYNAMIC && x.name === `${fresh.name}-kubeadm`)!.inputs.create,
        ),
        /readonly LOCAL_ENDPOINT_HOST='kubeone-api\.westeurope\.cloudapp\.azure\.com'/,
      );
    });

    it("refused: another public address, a frontend without one, or the pool's LB missing a VM", async () => {
      await assert.rejects(
        (await run(ipCfg, entries, noLabel(), check("20.79.99.99:6443"))).molt,
        /20\.79\.99\.99:6443 \(kubeadm-config\) is not served by load balancer kubernetes \(pool ApiServers\) \(20\.79\.14\.201/,
      );
      const unassigned = (token: string, inputs: Record<string, unknown>) =>
        token === "azure-native:network:getPublicIPAddress" ? {} : azure()(token, inputs);
      await assert.rejects(
        (await run(ipCfg, entries, unassigned, check(input.apiEndpoint!))).molt,
        /not served by load balancer kubernetes \(pool ApiServers\) \(no DNS name or address; an address\)/,
      );
      await assert.rejects(
        (await run(ipCfg, entries, noLabel([0, 2]), check(input.apiEndpoint!))).molt,
        new RegExp(`${entries[1].name}'s machine is not a member of load balancer kubernetes`),
      );
    });
  });

  it(
    "adoption is refused when the pool's load balancer does not " + "serve the endpoint, or a VM is not in the pool",
    async () => {
      const elsewhere = await run(cfg, entries, azure(), check("20.79.99.99:6443"));
      await assert.rejects(
        elsewhere.molt,
        /20\.79\.99\.99:6443 \(kubeadm-config\) is not served by load balancer kubernetes \(pool ApiServers\)/,
      );
      const missing = await run(cfg, entries, azure([0, 1]), check(input.apiEndpoint!));
      await assert.rejects(
        missing.molt,
        new RegExp(`${entries[2].name}'s machine is not a member of load balancer kubernetes`),
      );
    },
  );
});
