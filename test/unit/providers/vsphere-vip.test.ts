// vSphere with molt:apiEndpoint mode vip and static addresses: keepalived set up on each
// node before kubeadm, the track script on the local API server, and the node's address
// fixed before the clone through guestinfo network metadata.
import * as assert from "node:assert/strict";
import * as pulumi from "@pulumi/pulumi";
import { parse } from "yaml";
import { VSPHERE_TOKENS, VsphereControlPlaneNode, type VsphereNodeSettings } from "../../../infra/providers/vsphere";
import { shellcheck } from "../kubeadm/shell";
import {
  DYNAMIC,
  JOIN,
  bootstrapOf,
  fixtures,
  installMocks,
  one,
  reveal,
  settle,
  value,
  type Recorder,
} from "./harness";

const settings: VsphereNodeSettings = {
  datacenter: "dc1",
  network: "cp-net",
  numCpus: 4,
  memoryMiB: 16384,
  diskGiB: 60,
  failureDomains: { "rack-a": { computeCluster: "cl-a", datastore: "ds-a" } },
  staticAddresses: {
    pool: ["10.2.0.11-10.2.0.19"],
    prefixLength: 24,
    gateway: "10.2.0.1",
    nameservers: ["10.2.0.2"],
    searchDomains: ["prod.example.com"],
  },
  vip: { address: "10.2.0.100", virtualRouterId: 51 },
};

const cloud = (type: string, name: string) =>
  type === VSPHERE_TOKENS.virtualMachine ? { uuid: `${name}-uuid`, moid: "vm-42", defaultIpAddress: "10.2.0.250" } : {};
const lookups = (token: string, inputs: Record<string, unknown>): Record<string, unknown> =>
  token === VSPHERE_TOKENS.getVirtualMachine
    ? {
        id: `template-${String(inputs.name)}`,
        guestId: "ubuntu64Guest",
        scsiType: "pvscsi",
        firmware: "efi",
        disks: [{ label: "Hard disk 1", size: 20, thinProvisioned: true, eagerlyScrub: false }],
        networkInterfaceTypes: ["vmxnet3"],
      }
    : { id: `${token.split(":").pop()}:${String(inputs.name)}` };

describe("vSphere node with an API endpoint VIP and a static address", () => {
  let rec: Recorder;
  let node: VsphereControlPlaneNode;
  before(async () => {
    rec = installMocks(cloud, lookups);
    const f = fixtures({
      image: "ubuntu-2404-k8s-1.34.2",
      failureDomain: "rack-a",
      address: "10.2.0.12",
      generation: 7,
    });
    node = new VsphereControlPlaneNode(
      f.node.name,
      {
        ...f,
        bootstrap: { ...f.bootstrap, controlPlaneEndpoint: "10.2.0.100:6443" },
        settings,
        joinMaterial: pulumi.secret(JOIN),
      },
      { transformations: [rec.transformation] },
    );
    await value(node.providerId);
    await settle();
  });

  it("fixes the node's address before the clone: netplan in guestinfo metadata, not DHCP", async () => {
    const e = reveal(one(rec, VSPHERE_TOKENS.virtualMachine).inputs.extraConfig) as Record<string, string>;
    const metadata = parse(Buffer.from(e["guestinfo.metadata"], "base64").toString()) as Record<string, unknown>;
    assert.deepEqual(metadata.network, {
      version: 2,
      ethernets: {
        primary: {
          match: { name: "e*" },
          dhcp4: false,
          dhcp6: false,
          addresses: ["10.2.0.12/24"],
          routes: [{ to: "0.0.0.0/0", via: "10.2.0.1" }],
          nameservers: { addresses: ["10.2.0.2"], search: ["prod.example.com"] },
        },
      },
    });
    assert.equal(await value(node.privateAddress), "10.2.0.12", "not the guest's reported address");
    const kubeadm = bootstrapOf(rec, "cp-g2-a").inputs;
    assert.equal((reveal(kubeadm.connection) as { host: string }).host, "10.2.0.12");
    assert.match(String(kubeadm.create), /advertiseAddress: 10\.2\.0\.12/);
  });

  it("sets up keepalived after kubeadm, tracking the local API server, under systemd", () => {
    const ka = one(rec, DYNAMIC, "cp-g2-a-keepalived").inputs;
    const create = String(ka.create);
    assert.equal(shellcheck(create), "");
    assert.equal(shellcheck(String(ka.delete)), "");
    assert.match(create, /readonly VIP_ADDRESS='10\.2\.0\.100'/);
    assert.match(create, /readonly NODE_ADDRESS='10\.2\.0\.12'/);
    assert.match(create, /readonly RUN_MODE='systemd'/);
    assert.match(create, /virtual_router_id 51/);
    assert.match(create, /priority 170/, "priority from the generation");
    assert.match(create, /nopreempt/);
    assert.match(create, /init_fail/);
    assert.match(create, /--resolve "kubernetes:\$PORT:127\.0\.0\.1"/);
    assert.match(create, /readonly PORT=6443/);
    assert.match(create, /notify "\/etc\/keepalived\/molt-notify\.sh"/);
    assert.match(String(ka.delete), /stop_keepalived/);
    assert.deepEqual(ka.triggers, ["cp-g2-a-uuid"]);
    const opts = rec.transformed.find((t) => t.name === "cp-g2-a-keepalived")?.opts;
    const deps = (opts?.dependsOn ?? []) as { __name?: string }[];
    assert.ok(
      deps.some((d) => d.__name === "cp-g2-a-kubeadm"),
      "keepalived after kubeadm: over the rotated host key; deleted (VIP released) before the reset",
    );
  });
});

describe("vSphere node without a VIP", () => {
  it("creates no keepalived and keeps DHCP when the node has no static address", async () => {
    const rec = installMocks(cloud, lookups);
    const f = fixtures({ image: "ubuntu-2404-k8s-1.34.2", failureDomain: "rack-a" });
    const { vip: _vip, ...plain } = settings;
    const node = new VsphereControlPlaneNode(f.node.name, { ...f, settings: plain, joinMaterial: pulumi.secret(JOIN) });
    assert.equal(await value(node.privateAddress), "10.2.0.250");
    await settle();
    assert.equal(rec.resources.filter((r) => r.name.endsWith("-keepalived")).length, 0);
    const e = reveal(one(rec, VSPHERE_TOKENS.virtualMachine).inputs.extraConfig) as Record<string, string>;
    const metadata = parse(Buffer.from(e["guestinfo.metadata"], "base64").toString()) as Record<string, unknown>;
    assert.equal(metadata.network, undefined);
  });
});
