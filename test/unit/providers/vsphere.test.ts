import * as assert from "node:assert/strict";
import * as pulumi from "@pulumi/pulumi";
import { parse } from "yaml";
import {
  VSPHERE_PROVIDER_VERSION,
  VSPHERE_TOKENS,
  VsphereControlPlaneAntiAffinity,
  VsphereControlPlaneNode,
  type VsphereNodeSettings,
} from "../../../infra/providers/vsphere";
import { shellcheck } from "../kubeadm/shell";
import {
  JOIN,
  bootstrapOf,
  fixtures,
  hostKeyA,
  installMocks,
  isSecretValue,
  one,
  reveal,
  settle,
  value,
  type Recorder,
} from "./harness";

const settings: VsphereNodeSettings = {
  datacenter: "dc1",
  folder: "kubernetes/prod",
  network: "cp-net",
  numCpus: 4,
  memoryMiB: 16384,
  diskGiB: 60,
  failureDomains: {
    "rack-a": { computeCluster: "cl-a", datastore: "ds-a", host: "esx-a1" },
    "rack-b": { computeCluster: "cl-a", datastore: "ds-b" },
  },
};

const cloud = (type: string, name: string) =>
  type === VSPHERE_TOKENS.virtualMachine ? { uuid: `${name}-uuid`, moid: "vm-42", defaultIpAddress: "10.2.0.9" } : {};
const lookups = (token: string, inputs: Record<string, unknown>): Record<string, unknown> => {
  if (token === VSPHERE_TOKENS.getVirtualMachine) {
    return {
      id: `template-${String(inputs.name)}`,
      guestId: "ubuntu64Guest",
      scsiType: "pvscsi",
      firmware: "efi",
      disks: [{ label: "Hard disk 1", size: 20, thinProvisioned: true, eagerlyScrub: false }],
      networkInterfaceTypes: ["vmxnet3"],
    };
  }
  return { id: `${token.split(":").pop()}:${String(inputs.name)}` };
};

function build(rec: Recorder, overrides: Parameters<typeof fixtures>[0]) {
  const f = fixtures({ image: "ubuntu-2404-k8s-1.34.2", failureDomain: "rack-a", ...overrides });
  return new VsphereControlPlaneNode(
    f.node.name,
    { ...f, settings, joinMaterial: pulumi.secret(JOIN) },
    { transformations: [rec.transformation] },
  );
}

describe("vSphere control-plane node", () => {
  let rec: Recorder;
  let node: VsphereControlPlaneNode;
  before(async () => {
    rec = installMocks(cloud, lookups);
    node = build(rec, {});
    await value(node.providerId);
    await settle();
  });

  it("clones the VM from the node's template into its domain's resource pool, datastore, host and network", () => {
    const vm = one(rec, VSPHERE_TOKENS.virtualMachine).inputs;
    assert.deepEqual(vm.clone, { templateUuid: "template-ubuntu-2404-k8s-1.34.2" });
    assert.equal(vm.resourcePoolId, "getResourcePool:cl-a/Resources");
    assert.equal(vm.datastoreId, "getDatastore:ds-a");
    assert.equal(vm.hostSystemId, "getHost:esx-a1");
    assert.equal(vm.folder, "kubernetes/prod");
    assert.deepEqual(vm.networkInterfaces, [{ networkId: "getNetwork:cp-net", adapterType: "vmxnet3" }]);
    assert.equal(vm.guestId, "ubuntu64Guest");
  });

  it("never shrinks the template's disk and exposes disk UUIDs to the guest", () => {
    const vm = one(rec, VSPHERE_TOKENS.virtualMachine).inputs;
    assert.deepEqual(vm.disks, [{ label: "disk0", size: 60, thinProvisioned: true, eagerlyScrub: false }]);
    assert.equal(vm.enableDiskUuid, true);
  });

  it(
    "passes cloud-init user data with the pinned host key through guestinfo, as a secret, and wipes it after " + "boot",
    () => {
      const extra = one(rec, VSPHERE_TOKENS.virtualMachine).inputs.extraConfig;
      assert.ok(isSecretValue(extra));
      const e = reveal(extra) as Record<string, string>;
      assert.equal(e["guestinfo.userdata.encoding"], "base64");
      const userData = Buffer.from(e["guestinfo.userdata"], "base64").toString();
      assert.ok(userData.includes(hostKeyA.publicKey.trim()));
      const metadata = parse(Buffer.from(e["guestinfo.metadata"], "base64").toString()) as Record<string, unknown>;
      assert.deepEqual(metadata, {
        "instance-id": "cp-g2-a",
        "local-hostname": "cp-g2-a",
        "cleanup-guestinfo": ["userdata", "vendordata"],
      });
    },
  );

  it("asks the engine for the pinned pulumi-vsphere plugin version", () => {
    const opts = rec.transformed.find((t) => t.type === VSPHERE_TOKENS.virtualMachine)?.opts;
    assert.equal(opts?.version, VSPHERE_PROVIDER_VERSION);
    assert.deepEqual(opts?.replaceOnChanges, ["clone"]);
    assert.deepEqual(opts?.ignoreChanges, ["extraConfig"], "guestinfo stays as it was at creation");
  });

  it("looks up the template and placement in the configured datacenter", () => {
    const tmpl = rec.invokes.find((i) => i.token === VSPHERE_TOKENS.getVirtualMachine);
    assert.deepEqual(tmpl?.inputs, { name: "ubuntu-2404-k8s-1.34.2", datacenterId: "getDatacenter:dc1" });
  });

  it("bootstraps over SSH to the guest's address with the pinned host key", () => {
    const cmd = bootstrapOf(rec, "cp-g2-a").inputs;
    const c = reveal(cmd.connection) as Record<string, unknown>;
    assert.equal(c.host, "10.2.0.9");
    assert.equal(c.hostKey, hostKeyA.publicKey);
    assert.equal(shellcheck(String(cmd.create)), "");
    assert.deepEqual(cmd.triggers, ["cp-g2-a-uuid", "ubuntu-2404-k8s-1.34.2", "1.34.2"]);
  });

  it("exposes the vSphere provider id (the VM's BIOS UUID), and gives it to the kubelet", async () => {
    assert.equal(await value(node.providerId), "vsphere://cp-g2-a-uuid");
    assert.match(String(bootstrapOf(rec, "cp-g2-a").inputs.create), /providerID: vsphere:\/\/cp-g2-a-uuid/);
  });
});

describe("vSphere DRS anti-affinity between control-plane VMs", () => {
  it("keeps the control-plane VMs of a compute cluster on different hosts with one stable rule", async () => {
    const rec = installMocks(cloud, lookups);
    const nodes = [
      build(rec, { name: "cp-g1-a", generation: 1 }),
      build(rec, { name: "cp-g2-b", failureDomain: "rack-b", generation: 2 }),
    ];
    new VsphereControlPlaneAntiAffinity("cp-anti-affinity", { clusterName: "prod", nodes });
    await Promise.all(nodes.map((n) => value(n.providerId)));
    await settle();
    const rule = one(rec, VSPHERE_TOKENS.antiAffinityRule, "cp-anti-affinity-cl-a").inputs;
    assert.equal(rule.name, "prod-control-plane-anti-affinity");
    assert.equal(rule.computeClusterId, "getComputeCluster:cl-a");
    assert.deepEqual(rule.virtualMachineIds, ["cp-g1-a-uuid", "cp-g2-b-uuid"]);
    assert.equal(rule.mandatory, false);
  });

  it("creates no rule for a single VM, which vSphere would refuse", async () => {
    const rec = installMocks(cloud, lookups);
    const nodes = [build(rec, { name: "cp-g1-a", generation: 1 })];
    new VsphereControlPlaneAntiAffinity("cp-anti-affinity", { clusterName: "prod", nodes });
    await value(nodes[0].providerId);
    await settle();
    assert.equal(rec.resources.filter((r) => r.type === VSPHERE_TOKENS.antiAffinityRule).length, 0);
  });

  it("refuses a node whose failure domain has no placement", () => {
    installMocks(cloud, lookups);
    assert.throws(() => build(installMocks(cloud, lookups), { failureDomain: "rack-z" }), /rack-z.*rack-a, rack-b/);
  });
});
