// The example stacks in stacks/ rendered through the components under mocks: the
// equivalent of a `pulumi preview` of each, asserting the full resource tree of a
// brand-new 3-node cluster (first node kubeadm init, the others join).
import * as assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { parse } from "yaml";
import type { NodeEntry } from "../../../orchestrator/core/nodes";
import type { KubeadmBootstrapSettings } from "../../../infra/kubeadm/settings";
import { selectFailureDomainForNewNode } from "../../../orchestrator/core/placement";
import { AwsControlPlaneNode, type AwsNodeSettings } from "../../../infra/providers/aws";
import { AzureControlPlaneNode, type AzureNodeSettings } from "../../../infra/providers/azure";
import {
  VSPHERE_TOKENS,
  VsphereControlPlaneAntiAffinity,
  VsphereControlPlaneNode,
  type VsphereNodeSettings,
} from "../../../infra/providers/vsphere";
import type { ControlPlaneNodeOutputs } from "../../../infra/node";
import { JOIN, clientKey, hostKeyA, installMocks, settle, value } from "./harness";

// Compiled tests run from dist/test/unit/providers (or another outDir): find the repo root.
function stackFile(name: string): string {
  for (const root of [process.cwd(), join(__dirname, "../../../.."), join(__dirname, "../../..")]) {
    try {
      return readFileSync(join(root, "stacks", name), "utf8");
    } catch {
      continue;
    }
  }
  throw new Error(`stacks/${name} not found from ${process.cwd()}`);
}

function config(name: string): Record<string, unknown> {
  return (parse(stackFile(name)) as { config: Record<string, unknown> }).config;
}

function entries(c: Record<string, unknown>): NodeEntry[] {
  const domains = c["molt:failureDomains"] as string[];
  const nodes: NodeEntry[] = [];
  for (let i = 0; i < Number(c["molt:replicas"]); i++) {
    const failureDomain = selectFailureDomainForNewNode(
      domains,
      nodes.map((n) => ({ ...n, upToDate: true })),
    );
    nodes.push({
      name: `cp-g${i + 1}`,
      image: String(c["molt:image"]),
      kubernetesVersion: String(c["molt:kubernetesVersion"]),
      failureDomain,
      role: "control-plane",
      generation: i + 1,
      init: i === 0,
    });
  }
  return nodes;
}

function common(c: Record<string, unknown>, node: NodeEntry) {
  return {
    node,
    ssh: {
      user: (c["molt:ssh"] as { user: string }).user,
      privateKey: pulumi.secret(clientKey.privateKey),
      publicKey: clientKey.publicKey,
    },
    hostKey: { privateKey: pulumi.secret(hostKeyA.privateKey), publicKey: hostKeyA.publicKey },
    bootstrap: c["molt:bootstrap"] as KubeadmBootstrapSettings,
    ...(node.init ? {} : { joinMaterial: pulumi.secret(JOIN) }),
  };
}

const cloud = (type: string, name: string, inputs: Record<string, unknown>): Record<string, unknown> => {
  if (type === "aws:ec2/instance:Instance")
    return { privateIp: "10.0.1.10", availabilityZone: inputs.availabilityZone };
  if (type === "azure-native:network:NetworkInterface")
    return { ipConfigurations: [{ privateIPAddress: "10.1.0.10" }] };
  if (type === "azure-native:compute:VirtualMachine") return { vmId: `${name}-vmid` };
  if (type === VSPHERE_TOKENS.virtualMachine) return { uuid: `${name}-uuid`, defaultIpAddress: "10.2.0.10" };
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

async function tree(
  build: (c: Record<string, unknown>, nodes: NodeEntry[]) => ControlPlaneNodeOutputs[],
  file: string,
): Promise<string[]> {
  const rec = installMocks(cloud, lookups);
  const c = config(file);
  const built = build(c, entries(c));
  await Promise.all(built.map((n) => value(n.providerId)));
  await settle();
  return rec.resources.map((r) => `${r.type} ${r.name}`).sort();
}

const commands = ["cp-g1-kubeadm", "cp-g2-kubeadm", "cp-g3-kubeadm"].map(
  (n) => `pulumi-nodejs:dynamic/molt:RemoteCommand ${n}`,
);

describe("example stacks rendered with mocks", () => {
  it(
    "stacks/Pulumi.aws.yaml: three instances across three zones, each in the API target group, each " + "bootstrapped",
    async () => {
      const t = await tree(
        (c, nodes) =>
          nodes.map(
            (n) => new AwsControlPlaneNode(n.name, { ...common(c, n), settings: c["molt:aws"] as AwsNodeSettings }),
          ),
        "Pulumi.aws.yaml",
      );
      assert.deepEqual(
        t,
        [
          ...commands,
          ...["cp-g1", "cp-g2", "cp-g3"].flatMap((n) => [
            `aws:ec2/instance:Instance ${n}`,
            `aws:lb/targetGroupAttachment:TargetGroupAttachment ${n}-api`,
            `molt:aws:ControlPlaneNode ${n}`,
          ]),
        ].sort(),
      );
    },
  );

  it("stacks/Pulumi.azure.yaml: three VMs and NICs across zones 1-3, each bootstrapped", async () => {
    const t = await tree(
      (c, nodes) =>
        nodes.map(
          (n) => new AzureControlPlaneNode(n.name, { ...common(c, n), settings: c["molt:azure"] as AzureNodeSettings }),
        ),
      "Pulumi.azure.yaml",
    );
    assert.deepEqual(
      t,
      [
        ...commands,
        ...["cp-g1", "cp-g2", "cp-g3"].flatMap((n) => [
          `azure-native:compute:VirtualMachine ${n}`,
          `azure-native:network:NetworkInterface ${n}-nic`,
          `molt:azure:ControlPlaneNode ${n}`,
        ]),
      ].sort(),
    );
  });

  it(
    "stacks/Pulumi.vsphere.yaml: three cloned VMs across racks, one DRS anti-affinity rule, each " + "bootstrapped",
    async () => {
      const t = await tree((c, nodes) => {
        const built = nodes.map(
          (n) =>
            new VsphereControlPlaneNode(n.name, {
              ...common(c, n),
              settings: c["molt:vsphere"] as VsphereNodeSettings,
            }),
        );
        const aa = c["molt:vsphereAntiAffinity"] as { mandatory: boolean };
        new VsphereControlPlaneAntiAffinity("cp-anti-affinity", {
          clusterName: "prod",
          nodes: built,
          mandatory: aa.mandatory,
        });
        return built;
      }, "Pulumi.vsphere.yaml");
      assert.deepEqual(
        t,
        [
          ...commands,
          `${VSPHERE_TOKENS.antiAffinityRule} cp-anti-affinity-cl-prod`,
          "molt:vsphere:ControlPlaneAntiAffinity cp-anti-affinity",
          ...["cp-g1", "cp-g2", "cp-g3"].flatMap((n) => [
            `${VSPHERE_TOKENS.virtualMachine} ${n}`,
            `molt:vsphere:ControlPlaneNode ${n}`,
          ]),
        ].sort(),
      );
    },
  );
});
