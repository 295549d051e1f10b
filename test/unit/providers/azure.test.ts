import * as assert from "node:assert/strict";
import * as pulumi from "@pulumi/pulumi";
import { AzureControlPlaneNode, imageReference, type AzureNodeSettings } from "../../../infra/providers/azure";
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

const IMAGE = "Canonical:ubuntu-24_04-lts:server:24.04.202510010";
const settings: AzureNodeSettings = {
  resourceGroupName: "prod-cp",
  location: "westeurope",
  vmSize: "Standard_D4s_v5",
  subnetId: "/subscriptions/s/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/v/subnets/cp",
  apiBackendPoolId:
    "/subscriptions/s/resourceGroups/net/providers/Microsoft.Network/loadBalancers/api/backendAddressPools/cp",
  zones: ["1", "2", "3"],
  osDisk: { sizeGiB: 128 },
};
const VM = "azure-native:compute:VirtualMachine";
const NIC = "azure-native:network:NetworkInterface";

const cloud = (type: string, name: string, inputs: Record<string, unknown>) => {
  if (type === NIC)
    return { ipConfigurations: [{ ...(inputs.ipConfigurations as object[])[0], privateIPAddress: "10.1.0.7" }] };
  if (type === VM) return { vmId: `${name}-vmid` };
  return {};
};

describe("Azure control-plane node", () => {
  let rec: Recorder;
  let node: AzureControlPlaneNode;
  before(async () => {
    rec = installMocks(cloud);
    const f = fixtures({ image: IMAGE, failureDomain: "2" });
    node = new AzureControlPlaneNode(
      "cp-g2-a",
      { ...f, settings, joinMaterial: pulumi.secret(JOIN) },
      { transformations: [rec.transformation] },
    );
    await value(node.providerId);
    await settle();
  });

  it("creates the VM from the node's image reference in its availability zone", () => {
    const vm = one(rec, VM).inputs;
    assert.deepEqual((vm.storageProfile as { imageReference: unknown }).imageReference, {
      publisher: "Canonical",
      offer: "ubuntu-24_04-lts",
      sku: "server",
      version: "24.04.202510010",
    });
    assert.deepEqual(vm.zones, ["2"]);
    assert.equal(vm.vmName, "cp-g2-a");
    assert.deepEqual(vm.hardwareProfile, { vmSize: "Standard_D4s_v5" });
  });

  it("puts the NIC in the API load balancer's backend pool and the VM on that NIC", () => {
    const nic = one(rec, NIC).inputs;
    const ip = (nic.ipConfigurations as Array<Record<string, unknown>>)[0];
    assert.deepEqual(ip.loadBalancerBackendAddressPools, [{ id: settings.apiBackendPoolId }]);
    assert.deepEqual(ip.subnet, { id: settings.subnetId });
    const vm = one(rec, VM).inputs;
    assert.deepEqual((vm.networkProfile as { networkInterfaces: unknown }).networkInterfaces, [
      { id: "cp-g2-a-nic-id", primary: true, deleteOption: "Delete" },
    ]);
  });

  it("deletes the OS disk and NIC with the VM, so a retired node leaves nothing behind", () => {
    const vm = one(rec, VM).inputs as { storageProfile: { osDisk: Record<string, unknown> } };
    assert.equal(vm.storageProfile.osDisk.deleteOption, "Delete");
    assert.equal(vm.storageProfile.osDisk.diskSizeGB, 128);
  });

  it("installs the pre-generated host key through custom data, as a secret, and allows key logins only", () => {
    // The engine sees the custom data (or the whole osProfile holding it) as a secret.
    const raw = one(rec, VM).inputs.osProfile as Record<string, unknown>;
    assert.ok(isSecretValue(raw) || isSecretValue(raw.customData));
    const os = reveal(raw) as Record<string, unknown>;
    const cloudInit = Buffer.from(String(reveal(os.customData)), "base64").toString();
    assert.match(cloudInit, /^#cloud-config\n/);
    assert.ok(cloudInit.includes(hostKeyA.publicKey.trim()));
    assert.equal((os.linuxConfiguration as Record<string, unknown>).disablePasswordAuthentication, true);
  });

  it("bootstraps over SSH to the NIC's private address with the pinned host key", () => {
    const cmd = bootstrapOf(rec, "cp-g2-a").inputs;
    const c = reveal(cmd.connection) as Record<string, unknown>;
    assert.equal(c.host, "10.1.0.7");
    assert.equal(c.hostKey, hostKeyA.publicKey);
    assert.match(String(cmd.create), /advertiseAddress: 10\.1\.0\.7/);
    assert.equal(shellcheck(String(cmd.create)), "");
    assert.ok(isSecretValue(cmd.stdin));
  });

  it("exposes the Azure provider id of the VM, and gives it to the kubelet", async () => {
    assert.equal(await value(node.providerId), "azure://cp-g2-a-id");
    assert.match(String(bootstrapOf(rec, "cp-g2-a").inputs.create), /providerID: azure:\/\/cp-g2-a-id/);
  });

  it("replaces the VM rather than updating it when its image would change, and keeps its OS profile as created", () => {
    const opts = rec.transformed.find((t) => t.type === VM)?.opts;
    assert.deepEqual(opts?.replaceOnChanges, ["storageProfile.imageReference"]);
    assert.deepEqual(opts?.ignoreChanges, ["osProfile"]);
    assert.deepEqual(bootstrapOf(rec, "cp-g2-a").inputs.triggers, ["cp-g2-a-vmid", IMAGE, "1.34.2"]);
  });

  it("refuses a failure domain that is not one of the region's zones", () => {
    const f = fixtures({ image: IMAGE, failureDomain: "4" });
    assert.throws(
      () => new AzureControlPlaneNode("x", { ...f, settings, joinMaterial: JOIN }),
      /not one of the zones 1, 2, 3/,
    );
  });
});

describe("Azure image references", () => {
  it("accepts gallery image version ids as they are", () => {
    const id = "/subscriptions/s/resourceGroups/img/providers/Microsoft.Compute/galleries/g/images/cp/versions/1.34.2";
    assert.deepEqual(imageReference(id), { id });
  });

  it("refuses 'latest', which would change a node's image behind molt's back", () => {
    assert.throws(() => imageReference("Canonical:ubuntu-24_04-lts:server:latest"), /pin an exact version/);
  });
});
