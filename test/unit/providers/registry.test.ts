// The provider registry (infra/providers/registry.ts): one definition per provider, and
// what config, program, plugin check and targeting read from it.
import * as assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { CLUSTER_WIDE_TYPES, PROVIDER_KINDS, PROVIDERS, providerOf } from "../../../infra/providers/registry";
import { VSPHERE_PROVIDER_VERSION } from "../../../infra/providers/vsphere";
import { targetsFor } from "../../../orchestrator/stack/targets";

const lockfile = JSON.parse(readFileSync(join(__dirname, "..", "..", "..", "..", "package-lock.json"), "utf8")) as {
  packages: Record<string, { version: string }>;
};

describe("the provider registry", () => {
  it("lists each provider once, and the config's molt:provider values are exactly its kinds", () => {
    assert.deepEqual(PROVIDER_KINDS, ["lab", "aws", "azure", "vsphere"]);
    assert.equal(new Set(PROVIDER_KINDS).size, PROVIDERS.length);
  });

  it("gives every molt: section exactly one owner", () => {
    const owners = new Map<string, string[]>();
    for (const p of PROVIDERS)
      for (const key of Object.keys(p.sections)) owners.set(key, [...(owners.get(key) ?? []), p.kind]);
    assert.deepEqual(Object.fromEntries(owners), {
      "molt:lab": ["lab"],
      "molt:aws": ["aws"],
      "molt:azure": ["azure"],
      "molt:vsphere": ["vsphere"],
      "molt:vsphereAntiAffinity": ["vsphere"],
    });
  });

  it("asks for exactly the plugin versions the SDKs in package-lock.json (and the vSphere binding) request", () => {
    assert.deepEqual(providerOf("lab")?.plugins, []);
    assert.deepEqual(providerOf("aws")?.plugins, [
      { kind: "resource", name: "aws", version: lockfile.packages["node_modules/@pulumi/aws"].version },
    ]);
    assert.deepEqual(providerOf("azure")?.plugins, [
      {
        kind: "resource",
        name: "azure-native",
        version: lockfile.packages["node_modules/@pulumi/azure-native"].version,
      },
    ]);
    assert.deepEqual(providerOf("vsphere")?.plugins, [
      { kind: "resource", name: "vsphere", version: VSPHERE_PROVIDER_VERSION },
    ]);
    assert.deepEqual(
      PROVIDERS.flatMap((p) => p.plugins.map((x) => `${x.name} ${x.version}`)),
      ["aws 7.48.0", "azure-native 3.28.0", "vsphere 4.18.2"],
    );
  });

  it("targets the cluster-wide components of every provider, children included, even before they exist", () => {
    assert.deepEqual([...CLUSTER_WIDE_TYPES].sort(), [
      "molt:azure:ControlPlaneAvailabilitySet",
      "molt:vsphere:ControlPlaneAntiAffinity",
    ]);
    const state = [
      { urn: "urn:pulumi:s::molt::pulumi:pulumi:Stack::molt-s", type: "pulumi:pulumi:Stack" },
      {
        urn: "urn:pulumi:s::molt::molt:vsphere:ControlPlaneNode::s-cp-1",
        type: "molt:vsphere:ControlPlaneNode",
      },
    ];
    const plan = targetsFor(state, "s-cp-2", ["s-cp-1"])!;
    for (const t of CLUSTER_WIDE_TYPES) {
      assert.ok(plan.targets.includes(`**::${t}::*`), `${t} itself`);
      assert.ok(plan.targets.includes(`**::${t}$**`), `children of ${t}`);
    }
    assert.ok(!plan.targets.some((t) => t.includes("s-cp-1")), "no other node");
  });
});
