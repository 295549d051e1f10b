// The stored state read from an export (`stack export --show-secrets`) instead of two
// `stack output` commands: the same list, the client key unwrapped from its secret envelope,
// and a refusal rather than a guess when the export holds a secret still encrypted.
import * as assert from "node:assert/strict";
import type { Stack } from "@pulumi/pulumi/automation";
import { storedStateOfExport, viewOf, type ExportedState } from "../../orchestrator/stack/state";

const stack = { name: "s" } as Stack;
const molt = {
  schema: 1,
  nodes: [{ name: "s-cp-1", image: "lab-v1", role: "control-plane", generation: 1, init: true }],
  endpoints: [
    {
      name: "s-cp-1",
      privateAddress: "10.0.0.10",
      sshHost: "10.0.0.10",
      sshPort: 22,
      hostPublicKey: "ssh-ed25519 AAAA host",
      providerId: "lab://t/s-cp-1",
    },
  ],
  sshUser: "root",
  apiEndpoint: "10.0.0.1:6443",
};
const SIG = "4dabf18193072939515e22adb298388d";
const exported = (outputs: Record<string, unknown>): ExportedState =>
  ({
    resources: [{ urn: "urn:pulumi:s::molt::pulumi:pulumi:Stack::molt-s", type: "pulumi:pulumi:Stack", outputs }],
  }) as unknown as ExportedState;

describe("stored state from an export", () => {
  it("reads the node list and unwraps the client key from its secret envelope", async () => {
    const key = "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----\n";
    const st = await storedStateOfExport(
      stack,
      exported({ molt, sshPrivateKey: { [SIG]: "1b47061264138c4ac30d75fd1eb44270", plaintext: JSON.stringify(key) } }),
    );
    assert.deepEqual(st.nodes, molt.nodes);
    assert.equal(st.endpoints[0].sshHost, "10.0.0.10");
    assert.equal(st.sshPrivateKey, key);
    assert.equal(st.apiEndpoint, "10.0.0.1:6443");
  });

  it("refuses an export whose secrets are still encrypted (made without --show-secrets)", async () => {
    await assert.rejects(
      storedStateOfExport(
        stack,
        exported({ molt, sshPrivateKey: { [SIG]: "1b47061264138c4ac30d75fd1eb44270", ciphertext: "v1:abc" } }),
      ),
      /encrypted secret in the export/,
    );
  });

  it("refuses a node list that is not valid, as a read through `stack output` does", async () => {
    await assert.rejects(
      storedStateOfExport(stack, exported({ molt: { ...molt, nodes: [{ name: "" }] } })),
      /the node list stored in stack "s" is not valid/,
    );
  });

  it("takes the list and the guard's token from a graph-only export, and marks its secrets as encrypted", () => {
    const root = {
      urn: "urn:pulumi:s::molt::pulumi:pulumi:Stack::molt-s",
      type: "pulumi:pulumi:Stack",
      outputs: { molt, sshPrivateKey: { [SIG]: "1b47061264138c4ac30d75fd1eb44270", ciphertext: "v1:abc" } },
    };
    const guard = {
      urn: "urn:pulumi:s::molt::pulumi-nodejs:dynamic/molt:StateGuard::molt-state-guard",
      type: "pulumi-nodejs:dynamic/molt:StateGuard",
      outputs: { token: "t-1", expect: "t-0" },
    };
    const plain = { resources: [root, guard], listed: molt.nodes, plain: true } as unknown as ExportedState;
    const view = viewOf(plain);
    assert.deepEqual(view.listed, molt.nodes);
    assert.equal(view.guardToken, "t-1");
    assert.equal(view.plain, true, "state() must not read the client key from it");
    assert.equal(viewOf({ ...plain, plain: undefined }).plain, undefined);
  });
});
