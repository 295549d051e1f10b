// The Azure reference network (infra/providers/azure/network.ts) under Pulumi's mocks: the
// resources and how they link, and that its moltAzure output is a molt:azure section molt accepts.
import * as assert from "node:assert/strict";
import {
  AzureReferenceNetwork,
  azureNetworkProblems,
  azureSection,
  vnetPlan,
  type AzureReferenceNetworkArgs,
} from "../../../infra/providers/azure";
import { generateSshKeyPair } from "../../../infra/remote/ssh";
import { byType, clientKey, installMocks, isSecretValue, one, reveal, settle, value, type Recorder } from "./harness";

const SUB = "00000000-0000-0000-0000-0000000000aa";
const RG = `/subscriptions/${SUB}/resourceGroups/prod-rg`;
const cloud = (type: string, name: string, inputs: Record<string, unknown>): Record<string, unknown> => {
  if (type.endsWith("molt:SshKeyPair")) return generateSshKeyPair(name);
  // Azure names a resource group's `name` output after its input.
  if (type === "azure-native:resources:ResourceGroup") return { name: inputs.resourceGroupName };
  if (type === "azure-native:network:VirtualNetwork") return { name: inputs.virtualNetworkName };
  if (type === "azure-native:network:LoadBalancer")
    return {
      frontendIPConfigurations: [{ name: "KubeApi", privateIPAddress: "10.0.0.100" }],
      backendAddressPools: [
        {
          name: "ApiServers",
          id: `${RG}/providers/Microsoft.Network/loadBalancers/kubernetes/backendAddressPools/ApiServers`,
        },
      ],
    };
  if (type === "azure-native:network:PublicIPAddress" && String(inputs.publicIpAddressName).endsWith("bastion"))
    return { ipAddress: "203.0.113.9" };
  return {};
};

const args: AzureReferenceNetworkArgs = {
  clusterName: "prod",
  location: "westeurope",
  zones: ["1", "2", "3"],
  sshSourceCidrs: ["198.51.100.0/24"],
  bastion: { image: "Canonical:ubuntu-24_04-lts:server:24.04.202411030", user: "azureuser" },
  sshPublicKey: clientKey.publicKey,
};

describe("Azure reference network (mocks)", () => {
  let rec: Recorder;
  let net: AzureReferenceNetwork;
  before(async () => {
    rec = installMocks(cloud, (token) =>
      token === "azure-native:authorization:getClientConfig" ? { subscriptionId: SUB } : {},
    );
    net = new AzureReferenceNetwork("prod", args);
    await value(net.moltAzure);
    await value(net.bastion);
    await settle();
  });

  const rules = (nsg: string) =>
    one(rec, "azure-native:network:NetworkSecurityGroup", nsg).inputs.securityRules as Record<string, unknown>[];

  it("makes the resource group when none is given, and a VNet with a control-plane and a bastion subnet", () => {
    assert.equal(one(rec, "azure-native:resources:ResourceGroup").inputs.resourceGroupName, "prod-rg");
    assert.deepEqual(
      (one(rec, "azure-native:network:VirtualNetwork").inputs.addressSpace as Record<string, unknown>).addressPrefixes,
      ["10.0.0.0/16"],
    );
    const cp = one(rec, "azure-native:network:Subnet", "prod-control-plane").inputs;
    assert.equal(cp.addressPrefix, "10.0.0.0/20");
    assert.equal(cp.virtualNetworkName, "prod-vnet", "in the VNet");
    assert.deepEqual(cp.networkSecurityGroup, { id: "prod-control-plane-id" });
    assert.deepEqual(cp.natGateway, { id: "prod-nat-id" }, "outbound through the NAT gateway");
    const b = one(rec, "azure-native:network:Subnet", "prod-bastion").inputs;
    assert.equal(b.addressPrefix, "10.0.240.0/24");
    assert.deepEqual(b.networkSecurityGroup, { id: "prod-bastion-id" });
  });

  it("gives the NAT gateway a static Standard public address", () => {
    const nat = one(rec, "azure-native:network:NatGateway").inputs;
    assert.deepEqual(nat.publicIpAddresses, [{ id: "prod-nat-id" }]);
    const ip = one(rec, "azure-native:network:PublicIPAddress", "prod-nat").inputs;
    assert.equal(ip.publicIPAllocationMethod, "Static");
    assert.deepEqual(ip.sku, { name: "Standard" });
  });

  it("admits 6443 from the VNet and the LB probe, etcd/kubelet between nodes, SSH from the bastion subnet", () => {
    const r = rules("prod-control-plane");
    const find = (name: string) => r.find((x) => x.name === name)!;
    assert.deepEqual(
      [find("etcd").destinationPortRange, find("etcd").sourceAddressPrefix],
      ["2379-2380", "10.0.0.0/20"],
    );
    assert.deepEqual(
      [find("kubelet").destinationPortRange, find("kubelet").sourceAddressPrefix],
      ["10250", "10.0.0.0/20"],
    );
    assert.deepEqual([find("api").destinationPortRange, find("api").sourceAddressPrefix], ["6443", "VirtualNetwork"]);
    assert.equal(find("api-lb-probe").sourceAddressPrefix, "AzureLoadBalancer");
    assert.deepEqual([find("ssh").destinationPortRange, find("ssh").sourceAddressPrefix], ["22", "10.0.240.0/24"]);
    const deny = find("deny-vnet");
    assert.equal(deny.access, "Deny");
    assert.ok(
      r.every((x) => x === deny || (x.priority as number) < (deny.priority as number)),
      "the deny comes last",
    );
    assert.deepEqual(
      rules("prod-bastion").map((x) => [x.destinationPortRange, x.sourceAddressPrefixes]),
      [["22", ["198.51.100.0/24"]]],
    );
  });

  it("puts the API behind an internal Standard LB: pool ApiServers, a 6443 rule, an HTTPS /readyz probe", () => {
    const lb = one(rec, "azure-native:network:LoadBalancer").inputs;
    assert.equal(lb.loadBalancerName, "kubernetes");
    assert.equal((lb.sku as Record<string, unknown>).name, "Standard");
    const fe = (lb.frontendIPConfigurations as Record<string, unknown>[])[0];
    assert.deepEqual(fe.subnet, { id: "prod-control-plane-id" }, "internal: a private frontend in the subnet");
    assert.equal(fe.publicIPAddress, undefined);
    assert.deepEqual(fe.zones, ["1", "2", "3"]);
    assert.deepEqual(lb.backendAddressPools, [{ name: "ApiServers" }]);
    const probe = (lb.probes as Record<string, unknown>[])[0];
    assert.deepEqual([probe.protocol, probe.port, probe.requestPath], ["Https", 6443, "/readyz"]);
    const rule = (lb.loadBalancingRules as Record<string, Record<string, unknown>>[])[0];
    assert.deepEqual([rule.frontendPort, rule.backendPort, rule.protocol], [6443, 6443, "Tcp"]);
    const lbId = `${RG}/providers/Microsoft.Network/loadBalancers/kubernetes`;
    assert.equal(rule.frontendIPConfiguration.id, `${lbId}/frontendIPConfigurations/KubeApi`);
    assert.equal(rule.backendAddressPool.id, `${lbId}/backendAddressPools/ApiServers`);
    assert.equal(rule.probe.id, `${lbId}/probes/readyz`);
  });

  it("starts the bastion in its subnet with a public address and its pinned host key from cloud-init", async () => {
    const nic = one(rec, "azure-native:network:NetworkInterface").inputs;
    const ipc = (nic.ipConfigurations as Record<string, unknown>[])[0];
    assert.deepEqual(ipc.subnet, { id: "prod-bastion-id" });
    assert.deepEqual(ipc.publicIPAddress, { id: "prod-bastion-id" });
    const vm = one(rec, "azure-native:compute:VirtualMachine").inputs;
    const b = await value(net.bastion);
    assert.equal(b.host, "203.0.113.9");
    assert.equal(b.user, "azureuser");
    assert.match(b.hostKey, /^ssh-ed25519 /);
    const customData = Buffer.from(
      String((reveal(vm.osProfile) as Record<string, unknown>).customData),
      "base64",
    ).toString();
    assert.ok(customData.includes(b.hostKey), "the pinned key is the one cloud-init installs");
    assert.ok(isSecretValue(vm.osProfile), "the host key's private half is a secret in the state");
  });

  it("outputs a molt:azure section molt's schema accepts, once the subnet id has ARM's shape", async () => {
    const out = await value(net.moltAzure);
    assert.equal(out.resourceGroupName, "prod-rg");
    assert.equal(out.subnetId, "prod-control-plane-id");
    const section = {
      ...out,
      subnetId: `${RG}/providers/Microsoft.Network/virtualNetworks/prod-vnet/subnets/prod-control-plane`,
      vmSize: "Standard_D4s_v5",
      osDisk: { sizeGiB: 64 },
    };
    const parsed = azureSection.safeParse(section);
    assert.ok(parsed.success, JSON.stringify(parsed.error?.issues));
    assert.deepEqual(out.zones, ["1", "2", "3"]);
    assert.equal(await value(net.apiAddress), "10.0.0.100");
  });
});

describe("Azure reference network: an existing resource group", () => {
  it("makes none and puts everything in it", async () => {
    const rec = installMocks(cloud, (token) =>
      token === "azure-native:authorization:getClientConfig" ? { subscriptionId: SUB } : {},
    );
    const net = new AzureReferenceNetwork("prod", { ...args, resourceGroupName: "platform-rg", zones: [] });
    const out = await value(net.moltAzure);
    await settle();
    assert.equal(byType(rec, "azure-native:resources:ResourceGroup").length, 0);
    assert.equal(out.resourceGroupName, "platform-rg");
    assert.equal(out.zones, undefined);
    for (const r of rec.resources.filter((x) => x.type.startsWith("azure-native:network:")))
      assert.equal(r.inputs.resourceGroupName, "platform-rg", r.name);
  });
});

describe("Azure reference network: bad input", () => {
  const rows: [string, Partial<AzureReferenceNetworkArgs>, RegExp][] = [
    ["a /24 VNet", { vnetCidr: "10.0.0.0/24" }, /vnetCidr "10.0.0.0\/24": give a \/16/],
    ["not a zone", { zones: ["westeurope-1"] }, /zones: "westeurope-1" is not an Azure zone/],
    ["no SSH source", { sshSourceCidrs: [] }, /sshSourceCidrs: give at least one range/],
    ["an SSH source that is no CIDR", { sshSourceCidrs: ["office"] }, /"office" is not an IPv4 CIDR/],
    [
      "a bastion image on latest",
      { bastion: { image: "Canonical:ubuntu-24_04-lts:server:latest", user: "u" } },
      /bastion.image .*pin an exact version/,
    ],
    ["a cluster name Azure refuses", { clusterName: "Prod_1" }, /clusterName "Prod_1": 2 to 40 lower-case/],
    ["a location that is no region", { location: "West Europe" }, /location "West Europe": an Azure region name/],
  ];
  for (const [name, over, want] of rows)
    it(name, () => {
      const problems = azureNetworkProblems({ ...args, ...over });
      assert.equal(problems.length, 1, problems.join("; "));
      assert.match(problems[0], want);
      assert.throws(() => new AzureReferenceNetwork("bad", { ...args, ...over }), want);
    });
  it("the VNet plan", () =>
    assert.deepEqual(vnetPlan("172.16.0.0/16"), { controlPlane: "172.16.0.0/20", bastion: "172.16.240.0/24" }));
});
