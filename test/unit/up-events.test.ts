// What one `up` did, from its event stream (orchestrator/stack/up-events.ts): molt trusts
// these events instead of an export only when they are complete, and a prune's "every
// resource of the node is gone" check must fail closed on anything less.
import * as assert from "node:assert/strict";
import type { EngineEvent, OpType } from "@pulumi/pulumi/automation";
import { createdNodeEndpoint, notShownDeleted, UpRecorder } from "../../orchestrator/stack/up-events";

const U = (name: string, type = "pulumi-nodejs:dynamic/molt:LabMachine") => `urn:pulumi:s::molt::${type}::${name}`;
let seq = 0;
const done = (op: OpType, urn: string, outputs?: Record<string, unknown>): EngineEvent =>
  ({
    sequence: seq++,
    timestamp: 0,
    resOutputsEvent: {
      metadata: { op, urn, type: urn.split("::")[2], ...(outputs ? { new: { outputs } } : {}) },
    },
  }) as unknown as EngineEvent;
const failed = (urn: string): EngineEvent =>
  ({
    sequence: seq++,
    timestamp: 0,
    resOpFailedEvent: { metadata: { op: "delete", urn, type: "x" }, status: 1, steps: 0 },
  }) as unknown as EngineEvent;
const summary = { sequence: 0, timestamp: 0, summaryEvent: { resourceChanges: {} } } as unknown as EngineEvent;
const end = { sequence: 0, timestamp: 0, cancelEvent: {} } as unknown as EngineEvent;
const nodeResources = [U("s-cp-1-machine"), U("s-cp-1-lb", "pulumi-nodejs:dynamic/molt:LabLbAttachment")];

function record(events: EngineEvent[]) {
  const r = new UpRecorder();
  events.forEach(r.onEvent);
  return r.record();
}

describe("up events (what an update did, from its own event stream)", () => {
  it("a complete prune shows every resource of the node deleted: nothing left to check", () => {
    const r = record([
      done("same", U("s-cp-2-machine")),
      done("delete", nodeResources[0]),
      done("delete", nodeResources[1]),
      summary,
      end,
    ]);
    assert.equal(r.complete, true);
    assert.deepEqual(notShownDeleted(r, nodeResources), []);
    assert.deepEqual([...r.changed].sort(), [...nodeResources].sort());
  });

  it("a delete the engine skipped (no event for it) is reported, so the state decides", () => {
    const r = record([done("delete", nodeResources[0]), summary, end]);
    assert.equal(r.complete, true);
    assert.deepEqual(notShownDeleted(r, nodeResources), [nodeResources[1]]);
  });

  it("without the engine's summary the record is incomplete: every resource is checked in the state", () => {
    const r = record([done("delete", nodeResources[0]), done("delete", nodeResources[1])]);
    assert.equal(r.complete, false);
    assert.deepEqual(notShownDeleted(r, nodeResources), nodeResources);
  });

  it("a failed step makes the record incomplete even with a summary", () => {
    const r = record([done("delete", nodeResources[0]), failed(nodeResources[1]), summary, end]);
    assert.equal(r.complete, false);
    assert.deepEqual(r.failed, [nodeResources[1]]);
    assert.deepEqual(notShownDeleted(r, nodeResources), nodeResources);
  });

  it("the engine's closing cancelEvent is the end of the stream, not a cancel", () => {
    const r = record([done("create", U("s-cp-4-machine")), summary, end]);
    assert.equal(r.complete, true);
    assert.deepEqual([...r.created], [U("s-cp-4-machine")]);
  });

  it("planning events (a preview's) are not finished steps", () => {
    const r = new UpRecorder();
    r.onEvent({
      sequence: 1,
      timestamp: 0,
      resOutputsEvent: { planning: true, metadata: { op: "delete", urn: nodeResources[0], type: "x" } },
    } as unknown as EngineEvent);
    r.onEvent(summary);
    assert.deepEqual(notShownDeleted(r.record(), nodeResources), nodeResources);
  });

  it("the stack's outputs come from the root stack resource's finished step", () => {
    const molt = { schema: 1, nodes: [], endpoints: [], sshUser: "root", apiEndpoint: "10.0.0.1:6443" };
    const r = record([done("same", U("molt-s", "pulumi:pulumi:Stack"), { molt, sshPrivateKey: "[secret]" }), summary]);
    assert.deepEqual(r.stackOutputs?.molt, molt);
  });

  describe("a new node's endpoint from its component's outputs (connected while its join runs)", () => {
    const NODE = "molt:lab:ControlPlaneNode";
    const outs = {
      privateAddress: "10.77.102.7",
      sshHost: "10.77.102.7",
      sshPort: 22,
      hostPublicKey: "ssh-ed25519 AAAAhost",
      providerId: "lab://t2/s-cp-4",
    };
    const names = ["s-cp-1", "s-cp-4"];
    it("a created node component of the up's list, every field present: its endpoint", () => {
      assert.deepEqual(createdNodeEndpoint(done("create", U("s-cp-4", NODE), outs), names), {
        name: "s-cp-4",
        ...outs,
      });
      assert.equal(
        createdNodeEndpoint(done("create", U("s-cp-4", "molt:aws:ControlPlaneNode"), outs), names)?.name,
        "s-cp-4",
      );
    });
    const rows: [string, EngineEvent][] = [
      ["an existing node (same)", done("same", U("s-cp-1", NODE), outs)],
      ["a node not in the up's list", done("create", U("s-cp-9", NODE), outs)],
      ["another resource type (the machine)", done("create", U("s-cp-4"), outs)],
      [
        "no host key yet (a cloud node before its bootstrap)",
        done("create", U("s-cp-4", NODE), { ...outs, hostPublicKey: undefined }),
      ],
      ["an empty address", done("create", U("s-cp-4", NODE), { ...outs, sshHost: "" })],
      ["a port that is not a port", done("create", U("s-cp-4", NODE), { ...outs, sshPort: "22" })],
      ["port 0", done("create", U("s-cp-4", NODE), { ...outs, sshPort: 0 })],
      ["no outputs (the component's own registration)", done("create", U("s-cp-4", NODE))],
      ["a failed step", failed(U("s-cp-4", NODE))],
      [
        "a planning event (a preview's)",
        {
          sequence: 1,
          timestamp: 0,
          resOutputsEvent: {
            planning: true,
            metadata: { op: "create", urn: U("s-cp-4", NODE), type: NODE, new: { outputs: outs } },
          },
        } as unknown as EngineEvent,
      ],
    ];
    for (const [what, e] of rows)
      it(`nothing for ${what}`, () => assert.equal(createdNodeEndpoint(e, names), undefined));
  });
});
