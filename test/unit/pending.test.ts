// What molt says about (and then clears from the state) each operation a killed engine left pending.
import * as assert from "node:assert/strict";
import { explainPending } from "../../orchestrator/stack/pending";

const U = (name: string, type = "pulumi-nodejs:dynamic/molt:LabMachine") =>
  `urn:pulumi:s::molt::molt:lab:ControlPlaneNode$${type}::${name}`;

describe("pending operations left by a killed engine", () => {
  const resources = [{ urn: U("s-cp-2-machine"), type: "pulumi-nodejs:dynamic/molt:LabMachine" }];
  const table: [string, { urn: string; type: string }, string, RegExp][] = [
    [
      "creating",
      { urn: U("s-cp-2-machine"), type: "pulumi-nodejs:dynamic/molt:LabMachine" },
      "re-done later",
      /created it again/,
    ],
    [
      "creating",
      { urn: U("s-cp-4-machine"), type: "pulumi-nodejs:dynamic/molt:LabMachine" },
      "a node that never reached the list",
      /never reached the node list.*same name again$/,
    ],
    [
      "creating",
      { urn: U("s-cp-4-vm", "aws:ec2/instance:Instance"), type: "aws:ec2/instance:Instance" },
      "a cloud VM",
      /check the cloud for an untracked aws:ec2\/instance:Instance named s-cp-4-vm/,
    ],
    [
      "creating",
      { urn: U("s-cp-2-etcd"), type: "pulumi-nodejs:dynamic/molt:RemoteCommand" },
      "a listed node's resource",
      /listed node s-cp-2/,
    ],
    [
      "deleting",
      { urn: U("s-cp-2-machine"), type: "pulumi-nodejs:dynamic/molt:LabMachine" },
      "a delete still in the state",
      /deleted again with its node/,
    ],
    [
      "deleting",
      { urn: U("s-cp-1-machine"), type: "pulumi-nodejs:dynamic/molt:LabMachine" },
      "a delete already gone",
      /already gone/,
    ],
    [
      "updating",
      { urn: U("s-cp-2-machine"), type: "pulumi-nodejs:dynamic/molt:LabMachine" },
      "an update",
      /never updates/,
    ],
  ];
  for (const [op, resource, what, want] of table) {
    it(`${op}: ${what}`, () => {
      const [r] = explainPending([{ type: op, resource }], resources, ["s-cp-2", "s-cp-3"]);
      assert.equal(r.urn, resource.urn);
      assert.equal(r.operation, op);
      assert.match(r.reason, want);
    });
  }
});
