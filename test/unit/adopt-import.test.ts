// `molt adopt --import HOST=ID` (issue #15): the flags, which host each id belongs to, the
// id's shape per provider, and the options every imported machine is declared with.
import * as assert from "node:assert/strict";
import { providerOf } from "../../infra/providers/registry";
import { importOptions } from "../../infra/providers/provider";
import { matchImports, parseImportFlags } from "../../orchestrator/adopt/imports";
import { adoptCredentials } from "../../orchestrator/adopt/reach";
import type { AdoptionHost } from "../../orchestrator/adopt/input";
import type { StackConfig } from "../../orchestrator/config";

const hosts: AdoptionHost[] = ["10.0.1.10", "10.0.1.11", "10.0.1.12"].map((address, i) => ({
  address,
  sshHost: `203.0.113.${10 + i}`,
  sshPort: 22,
  hostname: `cp-${i}`,
}));
const cfgOf = (provider: string) => ({ intent: { provider } }) as unknown as Pick<StackConfig, "intent">;
const refuse = (...problems: string[]): never => {
  throw new Error(problems.join("\n"));
};

describe("molt adopt --import (unit)", () => {
  describe("flags", () => {
    it("reads HOST=ID pairs; an id may itself hold '='", () => {
      const r = parseImportFlags(["10.0.1.10=i-0123456789abcdef0", "cp-1=/a=b/vm/x"]);
      assert.deepEqual(r.problems, []);
      assert.deepEqual(r.requests, [
        { host: "10.0.1.10", id: "i-0123456789abcdef0" },
        { host: "cp-1", id: "/a=b/vm/x" },
      ]);
    });
    for (const bad of ["10.0.1.10", "=i-0123456789abcdef0", "10.0.1.10=", " = "])
      it(`bad input: --import ${JSON.stringify(bad)} names what is wrong`, () => {
        const r = parseImportFlags([bad]);
        assert.equal(r.requests.length, 0);
        assert.match(r.problems[0], /--import .*: HOST=ID/);
      });
  });

  describe("matching hosts and ids", () => {
    it("finds a host by address, SSH host or hostname", () => {
      const m = matchImports(
        [
          { host: "10.0.1.10", id: "i-0123456789abcdef0" },
          { host: "203.0.113.11", id: "i-0123456789abcdef1" },
          { host: "cp-2", id: "i-01234567" },
        ],
        hosts,
        cfgOf("aws"),
        refuse,
      );
      assert.deepEqual(
        [...m].map(([h, id]) => [h.address, id]),
        [
          ["10.0.1.10", "i-0123456789abcdef0"],
          ["10.0.1.11", "i-0123456789abcdef1"],
          ["10.0.1.12", "i-01234567"],
        ],
      );
    });
    const rows: [string, string, { host: string; id: string }[], RegExp][] = [
      ["a host of no cluster", "aws", [{ host: "10.9.9.9", id: "i-0123456789abcdef0" }], /10\.9\.9\.9 is none of/],
      [
        "a host named twice",
        "aws",
        [
          { host: "10.0.1.10", id: "i-0123456789abcdef0" },
          { host: "cp-0", id: "i-0123456789abcdef1" },
        ],
        /host cp-0 is named twice/,
      ],
      [
        "one machine for two hosts",
        "aws",
        [
          { host: "10.0.1.10", id: "i-0123456789abcdef0" },
          { host: "10.0.1.11", id: "i-0123456789abcdef0" },
        ],
        /named for two hosts/,
      ],
      ["an AMI for an instance", "aws", [{ host: "cp-0", id: "ami-0123456789abcdef0" }], /not an EC2 instance id/],
      ["a VM name for an Azure id", "azure", [{ host: "cp-0", id: "cp-0" }], /not an Azure VM resource id/],
      ["a relative vSphere path", "vsphere", [{ host: "cp-0", id: "vm/cp-0" }], /not a vSphere VM inventory path/],
      ["a path for a lab machine", "lab", [{ host: "cp-0", id: "/var/lib/x" }], /not a lab machine name/],
    ];
    for (const [what, provider, requests, message] of rows)
      it(`bad input (${provider}): ${what} is refused, naming it`, () => {
        assert.throws(() => matchImports(requests, hosts, cfgOf(provider), refuse), message);
      });
  });

  describe("ids per provider", () => {
    const ok: [string, string][] = [
      ["aws", "i-0123456789abcdef0"],
      ["aws", "i-0123abcd"],
      ["azure", "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/cp-0"],
      ["vsphere", "/dc1/vm/cp-0"],
      ["vsphere", "/dc1/vm/folder/sub/cp-0"],
      ["lab", "legacy-etcd-a"],
    ];
    for (const [provider, id] of ok)
      it(`${provider} takes ${id}`, () => assert.equal(providerOf(provider)!.importIdProblem(id), undefined));
  });

  it("declares every imported machine so the engine reads it, never changes it, and deletes it with its node", () => {
    assert.deepEqual(importOptions("i-0123456789abcdef0"), {
      import: "i-0123456789abcdef0",
      ignoreChanges: ["*"],
      retainOnDelete: false,
    });
  });
});

describe("molt adopt: the credential for hosts molt did not create (unit)", () => {
  const cfg = (agent: boolean, cloud: boolean) =>
    ({
      file: "stacks/Pulumi.prod.yaml",
      sshAccess: agent ? { agent: true } : {},
      ...(cloud ? { cloud: {} } : {}),
    }) as unknown as Parameters<typeof adoptCredentials>[0];
  const input = { sshKeySource: { privateKeyFile: "~/.ssh/kubeone" } } as Parameters<typeof adoptCredentials>[2];
  it("uses the stack's own key on a cloud stack, and the agent beside it when asked", () => {
    assert.deepEqual(adoptCredentials(cfg(false, true), "KEY", input, refuse), { privateKey: "KEY" });
    assert.deepEqual(adoptCredentials(cfg(true, true), "KEY", input, refuse), { privateKey: "KEY", agent: true });
    assert.deepEqual(adoptCredentials(cfg(true, false), undefined, input, refuse), { agent: true });
  });
  it("bad input: neither an agent nor a key is refused, saying both ways to give one on a cloud stack", () => {
    assert.throws(
      () => adoptCredentials(cfg(false, true), undefined, input, refuse),
      /molt:ssh\.agent: true .*ssh-add ~\/\.ssh\/kubeone.*pulumi config set --secret --path molt:ssh\.privateKey/s,
    );
    assert.throws(
      () => adoptCredentials(cfg(false, false), undefined, input, refuse),
      (e: Error) => /ssh-add ~\/\.ssh\/kubeone\)$/.test(e.message),
    );
  });
});
