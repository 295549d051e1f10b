// Retiring an adopted node (orchestrator/act/adopted.ts): what is wiped from the machine its
// owner keeps, and that the report says exactly that. With Kubernetes unobserved the cluster's
// host files come from the node's own static pod manifests (the rule of core/host-files.ts).
import * as assert from "node:assert/strict";
import { manifestsIn, READ_MANIFESTS, retireAdopted } from "../../orchestrator/act/adopted";
import type { ActContext } from "../../orchestrator/act/context";
import type { Operation } from "../../orchestrator/core/model";
import type { NodeEntry } from "../../orchestrator/core/nodes";
import type { RolloutEvent } from "../../orchestrator/events";

// kube-apiserver's manifest as kubeadm renders it from KubeOne's ClusterConfiguration (encryption
// providers, static audit log, admission configuration), kubeadm's own mounts and flags included.
const KUBEONE_APISERVER = `
apiVersion: v1
kind: Pod
metadata: { name: kube-apiserver, namespace: kube-system }
spec:
  containers:
  - name: kube-apiserver
    command:
    - kube-apiserver
    - --advertise-address=10.0.0.11
    - --client-ca-file=/etc/kubernetes/pki/ca.crt
    - --tls-cert-file=/etc/kubernetes/pki/apiserver.crt
    - --encryption-provider-config=/etc/kubernetes/encryption-providers/encryption-providers.yaml
    - --audit-policy-file=/etc/kubernetes/audit/policy.yaml
    - --audit-log-path=/var/log/kubernetes/audit.log
    - --admission-control-config-file=/etc/kubernetes/admission/admission-config.yaml
    volumeMounts:
    - { name: ca-certs, mountPath: /etc/ssl/certs, readOnly: true }
    - { name: k8s-certs, mountPath: /etc/kubernetes/pki, readOnly: true }
    - { name: encryption-providers-conf, mountPath: /etc/kubernetes/encryption-providers, readOnly: true }
    - { name: audit-conf, mountPath: /etc/kubernetes/audit, readOnly: true }
    - { name: log, mountPath: /var/log/kubernetes }
    - { name: admission-conf, mountPath: /etc/kubernetes/admission, readOnly: true }
  volumes:
  - { name: ca-certs, hostPath: { path: /etc/ssl/certs, type: DirectoryOrCreate } }
  - { name: k8s-certs, hostPath: { path: /etc/kubernetes/pki, type: DirectoryOrCreate } }
  - name: encryption-providers-conf
    hostPath: { path: /etc/kubernetes/encryption-providers, type: DirectoryOrCreate }
  - { name: audit-conf, hostPath: { path: /etc/kubernetes/audit, type: DirectoryOrCreate } }
  - { name: log, hostPath: { path: /var/log/kubernetes, type: DirectoryOrCreate } }
  - { name: admission-conf, hostPath: { path: /etc/kubernetes/admission, type: DirectoryOrCreate } }
`;
const PLAIN_SCHEDULER = `
apiVersion: v1
kind: Pod
spec:
  containers:
  - command: [kube-scheduler, --kubeconfig=/etc/kubernetes/scheduler.conf, --leader-elect=true]
    volumeMounts: [{ name: kubeconfig, mountPath: /etc/kubernetes/scheduler.conf, readOnly: true }]
  volumes: [{ name: kubeconfig, hostPath: { path: /etc/kubernetes/scheduler.conf, type: FileOrCreate } }]
`;

const entry: NodeEntry = {
  name: "ko-cp-0",
  image: "adopted",
  kubernetesVersion: "1.36.3",
  generation: 0,
  role: "control-plane",
  init: false,
  adopted: {
    address: "10.0.0.11",
    ssh: { host: "10.0.0.11", port: 22, user: "root" },
    hostKey: "ssh-ed25519 AAAA",
    etcdVersion: "3.6.5",
    source: "kubeone",
  },
} as NodeEntry;

/** The act against fakes: `manifests` is what READ_MANIFESTS prints on the node. */
async function retire(op: Partial<Extract<Operation, { kind: "retire-adopted" }>>, manifests = "") {
  const commands: string[] = [];
  const events: RolloutEvent[] = [];
  const ctx = {
    world: { nodes: [entry] },
    intent: { timeouts: { settleSeconds: 30 } },
    pollMs: 10,
    timed: (_phase: string, _kind: string, _node: string | undefined, f: () => Promise<unknown>) => f(),
    report: (e: RolloutEvent) => events.push(e),
    edges: {
      nodes: {
        unreachable: new Map<string, string>(),
        async run(_node: string, command: string) {
          commands.push(command);
          if (command.includes("### apiServer")) return manifests;
          return command.includes("echo wiped-secrets") ? "kubeadm-reset\nwiped-secrets\n" : "";
        },
      },
      stack: { releaseAdopted: async () => ["released"], apply: async () => undefined },
    },
  } as unknown as ActContext;
  await retireAdopted(
    { kind: "retire-adopted", node: entry.name, wipe: ["/etc/kubernetes/pki"], reason: "test", ...op },
    ctx,
  );
  const left = events.find((e) => e.type === "left-for-owner");
  assert.ok(left && left.type === "left-for-owner");
  const reset = commands.find((c) => c.includes("echo wiped-secrets")) ?? "";
  return { commands, done: left.done, reset };
}

describe("retiring an adopted node: what is wiped, and the report (orchestrator/act/adopted.ts)", () => {
  it("Kubernetes unobserved: the host files its own manifests name are wiped too, and the report says so", async () => {
    const out = `### apiServer\n${KUBEONE_APISERVER}\n### scheduler\n${PLAIN_SCHEDULER}\n`;
    const r = await retire({ hostFilesUnknown: true }, out);
    assert.ok(r.commands[0].includes("### apiServer"), "the manifests are read before the reset removes them");
    assert.match(r.commands[0], /kube-apiserver\.yaml\.retired/, "the stopped API server's manifest too");
    for (const p of ["encryption-providers", "audit", "admission"])
      assert.match(r.reset, new RegExp(`rm -rf -- .*'/etc/kubernetes/${p}'`), p);
    assert.doesNotMatch(r.reset, /\/etc\/ssl|\/var\/log|scheduler\.conf/, "not the machine's own files");
    assert.ok(
      r.done.includes(
        "removed from the machine: /etc/kubernetes/pki, /etc/kubernetes/admission, /etc/kubernetes/audit, " +
          "/etc/kubernetes/encryption-providers",
      ),
      r.done.join("\n"),
    );
    assert.ok(r.done.some((d) => /read from the machine's own static pod manifests/.test(d)));
  });

  it("Kubernetes unobserved and no manifest left: only pki removed, and the report does not claim more", async () => {
    const r = await retire({ hostFilesUnknown: true }, "");
    assert.ok(r.done.includes("removed from the machine: /etc/kubernetes/pki"), r.done.join("\n"));
    assert.ok(
      r.done.some((d) => /host files unknown .* may remain; check the machine/.test(d)),
      r.done.join("\n"),
    );
    assert.ok(!r.done.some((d) => /secrets removed/.test(d)), "no claim that the cluster's secrets are gone");
  });

  it("Kubernetes observed: the plan's list is wiped as it is, no manifest read", async () => {
    const r = await retire({ wipe: ["/etc/kubernetes/pki", "/etc/kubernetes/encryption-providers"] });
    assert.equal(r.commands.length, 1);
    assert.ok(r.done.includes("removed from the machine: /etc/kubernetes/pki, /etc/kubernetes/encryption-providers"));
  });

  it("a path outside /etc/kubernetes/ (or climbing out of it) is left on the machine, and named", async () => {
    // The manifests name an owner's file and a path that resolves outside /etc/kubernetes/.
    const escaping = KUBEONE_APISERVER.replace(
      "    - --audit-log-path",
      "    - --authentication-token-webhook-config-file=/var/lib/foo/key.yaml\n" +
        "    - --tracing-config-file=/etc/kubernetes/../shadow\n    - --audit-log-path",
    )
      .replace(
        "    volumeMounts:\n",
        "    volumeMounts:\n    - { name: foo, mountPath: /var/lib/foo, readOnly: true }\n" +
          "    - { name: up, mountPath: /etc/kubernetes/../shadow, readOnly: true }\n",
      )
      .replace(
        "  volumes:\n",
        "  volumes:\n  - { name: foo, hostPath: { path: /var/lib/foo } }\n" +
          "  - { name: up, hostPath: { path: /etc/kubernetes/../shadow, type: File } }\n",
      );
    const r = await retire({ hostFilesUnknown: true, outside: ["/var/lib/bar/token"] }, `### apiServer\n${escaping}\n`);
    const rm = /rm -rf -- (.*)/.exec(r.reset)?.[1] ?? "";
    assert.match(rm, /'\/etc\/kubernetes\/encryption-providers'/);
    for (const p of ["/var/lib/foo", "/var/lib/bar", "shadow", ".."]) assert.ok(!rm.includes(p), `${p} wiped: ${rm}`);
    assert.ok(
      r.done.includes(
        "left on the machine (named by the cluster, outside /etc/kubernetes/): " +
          "/var/lib/bar/token, /etc/shadow, /var/lib/foo",
      ),
      r.done.join("\n"),
    );
  });

  it("a dead node with Kubernetes unobserved: its owner hears the host files may be there too", async () => {
    const commands: string[] = [];
    const events: RolloutEvent[] = [];
    const ctx = {
      world: { nodes: [entry] },
      intent: { timeouts: { settleSeconds: 30 } },
      timed: (_a: string, _b: string, _c: string, f: () => Promise<unknown>) => f(),
      report: (e: RolloutEvent) => events.push(e),
      edges: {
        nodes: {
          unreachable: new Map([[entry.name, "refused"]]),
          run: async (_n: string, c: string) => commands.push(c),
        },
        stack: { releaseAdopted: async () => [], apply: async () => undefined },
      },
    } as unknown as ActContext;
    await retireAdopted(
      {
        kind: "retire-adopted",
        node: entry.name,
        wipe: ["/etc/kubernetes/pki"],
        unreachable: true,
        hostFilesUnknown: true,
        reason: "test",
      },
      ctx,
    );
    assert.deepEqual(commands, []);
    const left = events.find((e) => e.type === "left-for-owner");
    assert.ok(left?.type === "left-for-owner");
    assert.match(left.done[0], /\/etc\/kubernetes\/pki\) and the cluster's host files \(unknown/);
  });

  it("reads the manifests' output by component; garbage gives none", () => {
    assert.deepEqual(Object.keys(manifestsIn(`### apiServer\na: 1\n### scheduler\nb: 2\n`)), [
      "apiServer",
      "scheduler",
    ]);
    assert.deepEqual(manifestsIn("no markers here"), {});
    assert.match(READ_MANIFESTS, /SUDO cat/);
  });
});
