// Pure parts of the Kubernetes edge: image tags, kubeconfig credentials, the hand-over of a
// retiring node's leader Leases (which pods a drain evicts: test/unit/drain.test.ts).
import * as assert from "node:assert/strict";
import { credentialsOf, KubeAccess, tagVersion } from "../../orchestrator/edges/kube";
import { releasedLease } from "../../orchestrator/edges/kube-support";
import { securePortOf } from "../../orchestrator/edges/static-pods";

describe("Kubernetes edge helpers (orchestrator/edges/kube.ts)", () => {
  it("reads the version from an image tag", () => {
    assert.equal(tagVersion("registry.k8s.io/kube-proxy:v1.37.2"), "1.37.2");
    assert.equal(tagVersion("localhost:5000/kube-proxy:v1.36.3@sha256:abc"), "1.36.3");
  });

  it("takes embedded credentials from a kubeconfig and refuses one without them", () => {
    const b = (s: string) => Buffer.from(s).toString("base64");
    const kc = `apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: ${b("CA")}\n    server: https://10.0.0.1:6443\n  name: k\nusers:\n- name: admin\n  user:\n    client-certificate-data: ${b("CERT")}\n    client-key-data: ${b("KEY")}\n`;
    assert.deepEqual(credentialsOf(kc), { ca: "CA", cert: "CERT", key: "KEY" });
    assert.equal(credentialsOf(kc.replace(/client-key-data.*\n/, "")), undefined);
    assert.equal(credentialsOf("not: [a, kubeconfig"), undefined);
  });

  describe("a retiring node's leader Lease (releasedLease)", () => {
    const renewed = new Date("2026-12-03T22:00:00Z");
    const now = new Date("2026-12-03T22:00:05Z");
    const held = (holderIdentity: string) => ({
      holderIdentity,
      leaseDurationSeconds: 15,
      acquireTime: renewed,
      renewTime: renewed,
      leaseTransitions: 4,
    });

    it("hands on a Lease the stopped node's component holds, as client-go's release writes it", () => {
      assert.deepEqual(releasedLease(held("molt-cp-2_5f1c9a2e-1b2c-4d5e-8f90-123456789abc"), "molt-cp-2", now), {
        holderIdentity: "",
        leaseDurationSeconds: 1,
        acquireTime: now,
        renewTime: now,
        leaseTransitions: 4,
      });
      assert.equal(releasedLease(held("molt-cp-2"), "molt-cp-2", now)?.holderIdentity, "");
    });

    it("leaves another node's Lease alone, a name prefix included", () => {
      assert.equal(releasedLease(held("molt-cp-3_5f1c9a2e"), "molt-cp-2", now), undefined);
      assert.equal(releasedLease(held("molt-cp-20_5f1c9a2e"), "molt-cp-2", now), undefined);
      assert.equal(releasedLease(held("x-molt-cp-2_5f1c9a2e"), "molt-cp-2", now), undefined);
    });

    it("leaves a Lease under coordinated leader election (a strategy) to its coordinator", () => {
      const coordinated = { ...held("molt-cp-2_5f1c9a2e"), strategy: "OldestEmulationVersion" };
      assert.equal(releasedLease(coordinated, "molt-cp-2", now), undefined);
      assert.equal(releasedLease({ ...coordinated, preferredHolder: "molt-cp-3_77" }, "molt-cp-2", now), undefined);
    });

    it("writes nothing when there is no holder or no spec", () => {
      assert.equal(releasedLease(held(""), "molt-cp-2", now), undefined);
      assert.equal(releasedLease({}, "molt-cp-2", now), undefined);
      assert.equal(releasedLease(undefined, "molt-cp-2", now), undefined);
    });
  });
});

describe("a retiring node's control plane stopped (KubeAccess.stopApiServer)", () => {
  // The edge over a fake SSH session and a fake Lease API: what it runs, in which order,
  // and which Leases it writes. `running`: how many more checks still find the controllers'
  // port listening, or their process alive; `manifests`: extra flags of each static pod.
  function fakeEdge(
    holders: Record<string, string>,
    running: { port?: number; process?: number; apiPort?: number; apiProcess?: number },
    leaseApi: "answers" | "fails" = "answers",
    flags: Record<string, string[]> = {},
  ) {
    const log: string[] = [];
    const checked: string[] = [];
    const apiAsked: { port: boolean; process: boolean }[] = [];
    const manifest = (name: string) =>
      `apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: ${name}\n    command:\n` +
      [name, "--bind-address=127.0.0.1", ...(flags[name] ?? [])].map((a) => `    - ${a}\n`).join("");
    const ssh = {
      target: { user: "root" },
      run: async (cmd: string) => {
        if (cmd.includes("### molt static pod")) {
          log.push("run read manifests");
          return ["kube-controller-manager", "kube-scheduler", "kube-apiserver"]
            .map((n) => `### molt static pod ${n}\n${manifest(n)}`)
            .join("");
        }
        log.push(`run ${cmd}`);
        return "";
      },
      exec: async (cmd: string) => {
        const controllers = cmd.includes("kube-controller-manager|kube-scheduler");
        log.push(`exec check ${controllers ? "controllers" : "apiserver"}`);
        checked.push(...[...cmd.matchAll(/sport = :(\d+)/g)].map((m) => `${controllers ? "c" : "a"}:${m[1]}`));
        const out: string[] = [];
        if (controllers && (running.port ?? 0) > 0) {
          running.port!--;
          out.push(`listening: LISTEN 0 4096 127.0.0.1:${cmd.match(/sport = :(\d+)/)![1]} 0.0.0.0:*`);
        }
        if (controllers && (running.process ?? 0) > 0) {
          running.process!--;
          out.push("process: kube-controller-manager (pid 4242)");
        }
        // The API server: what the script asks for is what it can see (a port, its process).
        const asks = { port: /sport = :/.test(cmd), process: /proc\/\[0-9\]\*\/cmdline/.test(cmd) };
        if (!controllers) apiAsked.push(asks);
        if (!controllers && asks.port && (running.apiPort ?? 0) > 0) {
          running.apiPort!--;
          out.push(`listening: LISTEN 0 4096 *:${cmd.match(/sport = :(\d+)/)![1]} *:*`);
        }
        if (!controllers && asks.process && (running.apiProcess ?? 0) > 0) {
          running.apiProcess!--;
          out.push("process: kube-apiserver (pid 4343)");
        }
        return { code: 0, stdout: out.join("\n"), stderr: "" };
      },
    };
    const written: Record<string, { holderIdentity?: string; leaseDurationSeconds?: number }> = {};
    const coord = {
      readNamespacedLease: async ({ name }: { name: string }) => {
        if (leaseApi === "fails") throw Object.assign(new Error("etcdserver: request timed out\nmore"), { code: 500 });
        return {
          metadata: { name, namespace: "kube-system", resourceVersion: "7" },
          spec: { holderIdentity: holders[name], leaseDurationSeconds: 15, leaseTransitions: 2 },
        };
      },
      replaceNamespacedLease: async (a: {
        name: string;
        body: { metadata: { resourceVersion: string }; spec: { holderIdentity?: string } };
      }) => {
        assert.equal(a.body.metadata.resourceVersion, "7", "an optimistic-concurrency update");
        log.push(`lease ${a.name}`);
        written[a.name] = a.body.spec;
      },
    };
    const kube = Object.create(KubeAccess.prototype) as KubeAccess;
    Object.assign(kube, {
      pool: { get: () => ssh },
      ports: new Map(),
      api: async () => ({ coord, m: { V1MicroTime: Date } }),
    });
    return { kube, log, written, checked, apiAsked };
  }
  const shortly = (log: string[]) =>
    log.map((l) =>
      l
        .replace(/^run .*kube-controller-manager.yaml.*kube-scheduler.yaml.*$/, "run controllers aside")
        .replace(/^run .*mv \/etc\/kubernetes\/manifests\/kube-apiserver\.yaml .*$/, "run apiserver aside"),
    );

  it("stops controller-manager and scheduler, hands on the Lease its node held, then the API server", async () => {
    const { kube, log, written, checked } = fakeEdge(
      { "kube-controller-manager": "cp-1_0c6f2a", "kube-scheduler": "cp-2_91ab3d" },
      { port: 2 },
    );
    assert.deepEqual(await kube.stopApiServer("cp-1", 5), [], "nothing went wrong");
    assert.deepEqual(shortly(log), [
      "run read manifests",
      "run controllers aside",
      "exec check controllers",
      "exec check controllers",
      "exec check controllers",
      "lease kube-controller-manager",
      "run apiserver aside",
      "exec check apiserver",
    ]);
    assert.deepEqual([...new Set(checked)], ["c:10257", "c:10259", "a:6443"], "kubeadm's default ports");
    assert.equal(written["kube-controller-manager"].holderIdentity, "");
    assert.equal(written["kube-controller-manager"].leaseDurationSeconds, 1);
    assert.equal(written["kube-scheduler"], undefined, "another node's scheduler keeps its Lease");
  });

  it("waits for the component's process to be gone, not only its port closed", async () => {
    const { kube, log } = fakeEdge({ "kube-controller-manager": "cp-1_0c6f2a" }, { process: 3 });
    await kube.stopApiServer("cp-1", 5);
    assert.deepEqual(shortly(log).slice(1, 7), [
      "run controllers aside",
      "exec check controllers",
      "exec check controllers",
      "exec check controllers",
      "exec check controllers",
      "lease kube-controller-manager",
    ]);
  });

  it("the API server is stopped once its port is closed: its process may linger (watches) until SIGKILL", async () => {
    // kube-apiserver stops listening a few seconds after SIGTERM and exits only when its
    // watches end or the kubelet kills it (30 s): molt goes on once the port is closed.
    const { kube, log, apiAsked } = fakeEdge({}, { apiPort: 2, apiProcess: 1_000 });
    await kube.stopApiServer("cp-1", 1);
    assert.deepEqual(shortly(log).slice(-4), [
      "run apiserver aside",
      "exec check apiserver",
      "exec check apiserver",
      "exec check apiserver",
    ]);
    assert.ok(
      apiAsked.every((a) => a.port && !a.process),
      "its port is watched, not its process",
    );
  });

  it("with --secure-port=0 the API server's process decides: one that never exits fails at the deadline", async () => {
    const { kube, apiAsked } = fakeEdge({}, { apiProcess: 1_000 }, "answers", {
      "kube-apiserver": ["--secure-port=0"],
    });
    await assert.rejects(kube.stopApiServer("cp-1", 1), /kube-apiserver on cp-1 to stop .*process: kube-apiserver/);
    assert.ok(apiAsked.length > 0 && apiAsked.every((a) => !a.port && a.process), "its process is watched");
  });

  it("restores: the manifests go back only once the stopped API server's process has exited", async () => {
    // Its grace period (infra/kubeadm/grace.ts) may keep it finishing requests after its port
    // closed; the kubelet would start the restored pod only after that anyway.
    const { kube, log, apiAsked } = fakeEdge({}, { apiProcess: 3 });
    await kube.restoreControlPlane("cp-1", ["/etc/kubernetes/kube-apiserver.yaml.retired"], 5);
    assert.deepEqual(shortly(log).slice(0, 4), Array(4).fill("exec check apiserver"));
    assert.match(
      log[4],
      /^run .*mv \/etc\/kubernetes\/kube-apiserver\.yaml\.retired \/etc\/kubernetes\/manifests\/kube-apiserver\.yaml/,
    );
    assert.equal(log.length, 5);
    assert.ok(
      apiAsked.every((a) => a.process && !a.port),
      "its process is watched, not a port",
    );
  });

  it("restores nothing while the stopped process outlives the deadline, and says what runs", async () => {
    const { kube, log } = fakeEdge({}, { apiProcess: 1_000 });
    await assert.rejects(
      kube.restoreControlPlane("cp-1", ["/etc/kubernetes/kube-apiserver.yaml.retired"], 1),
      /stopped kube-apiserver on cp-1 to exit before its manifests go back.*process: kube-apiserver \(pid 4343\)/s,
    );
    assert.ok(log.length > 0 && log.every((l) => l === "exec check apiserver"), "no manifest was moved");
  });

  it("watches the port a manifest's --secure-port names, in either form", async () => {
    const { kube, checked } = fakeEdge({}, {}, "answers", {
      "kube-controller-manager": ["--secure-port=10357"],
      "kube-scheduler": ["--secure-port", "10359"],
      "kube-apiserver": ["--secure-port=7443"],
    });
    await kube.stopApiServer("cp-1", 5);
    assert.deepEqual([...new Set(checked)], ["c:10357", "c:10359", "a:7443"]);
  });

  it("with --secure-port=0 (no secure serving) watches only the process; an unreadable manifest, the default", () => {
    const m = (arg: string) => `spec:\n  containers:\n  - command: [kube-scheduler, "${arg}"]\n`;
    assert.equal(securePortOf(m("--secure-port=0"), 10259), undefined);
    assert.equal(securePortOf(m("--v=2"), 10259), 10259);
    assert.equal(securePortOf("not: [yaml", 10259), 10259);
    assert.equal(securePortOf(undefined, 10259), 10259);
  });

  it("still stops the API server when the Lease API fails, and says the Leases were not handed on", async () => {
    const { kube, log, written } = fakeEdge({ "kube-controller-manager": "cp-1_0c6f2a" }, {}, "fails");
    const warnings = await kube.stopApiServer("cp-1", 5);
    assert.deepEqual(written, {});
    assert.ok(shortly(log).includes("run apiserver aside"), "the API server stopped");
    assert.equal(warnings.length, 1);
    assert.match(warnings[0], /leader Leases cp-1 held were not handed on \(etcdserver: request timed out\)/);
  });

  it("writes no Lease while a component still runs: the deadline passes and nothing is handed on", async () => {
    const { kube, log, written } = fakeEdge({ "kube-controller-manager": "cp-1_0c6f2a" }, { process: 1_000 });
    await assert.rejects(
      kube.stopApiServer("cp-1", 1),
      /kube-controller-manager and kube-scheduler on cp-1 to stop .*still running: process: kube-controller-manager/,
    );
    assert.deepEqual(written, {});
    assert.ok(!shortly(log).includes("run apiserver aside"), "the API server is left running");
  });
});

describe("a destroyed machine's Node deleted (KubeAccess.deleteNode)", () => {
  it("deletes the Node, then the pods still bound to it at once, each by its UID", async () => {
    const calls: string[] = [];
    const core = {
      deleteNode: async ({ name }: { name: string }) => void calls.push(`delete node ${name}`),
      listPodForAllNamespaces: async ({ fieldSelector }: { fieldSelector: string }) => {
        calls.push(`list ${fieldSelector}`);
        return {
          items: [
            { metadata: { name: "kube-proxy-x1", namespace: "kube-system", uid: "u1" } },
            { metadata: { name: "web-2", namespace: "apps", uid: "u2" } },
          ],
        };
      },
      deleteNamespacedPod: async (a: {
        name: string;
        namespace: string;
        gracePeriodSeconds: number;
        body: { preconditions: { uid: string } };
      }) => {
        calls.push(`delete pod ${a.namespace}/${a.name} grace ${a.gracePeriodSeconds} uid ${a.body.preconditions.uid}`);
        // A pod deleted meanwhile, or replaced by one of the same name: left alone, no error.
        if (a.name === "web-2") throw Object.assign(new Error("conflict"), { code: 409 });
      },
    };
    const kube = Object.create(KubeAccess.prototype) as KubeAccess;
    Object.assign(kube, { api: async () => ({ core }) });
    assert.deepEqual(await kube.deleteNode("cp-4", "cp-1", { machineGone: true }), []);
    assert.deepEqual(calls, [
      "delete node cp-1",
      "list spec.nodeName=cp-1",
      "delete pod kube-system/kube-proxy-x1 grace 0 uid u1",
      "delete pod apps/web-2 grace 0 uid u2",
    ]);
  });
  it("leaves the pods of a machine that may still run (not destroyed by molt) to their kubelet", async () => {
    const calls: string[] = [];
    const core = {
      deleteNode: async ({ name }: { name: string }) => void calls.push(`delete node ${name}`),
      listPodForAllNamespaces: async () => {
        calls.push("list");
        return { items: [] };
      },
    };
    const kube = Object.create(KubeAccess.prototype) as KubeAccess;
    Object.assign(kube, { api: async () => ({ core }) });
    assert.deepEqual(await kube.deleteNode("cp-4", "adopted-1"), []);
    assert.deepEqual(calls, ["delete node adopted-1"]);
  });

  it("says which pods it could not delete once the Node is gone, instead of failing", async () => {
    const core = {
      deleteNode: async () => undefined,
      listPodForAllNamespaces: async () => ({
        items: [
          { metadata: { name: "a", namespace: "x", uid: "u1" } },
          { metadata: { name: "b", namespace: "x", uid: "u2" } },
        ],
      }),
      deleteNamespacedPod: async (a: { name: string }) => {
        if (a.name === "b")
          throw Object.assign(new Error("the server is currently unable to handle the request"), { code: 503 });
      },
    };
    const kube = Object.create(KubeAccess.prototype) as KubeAccess;
    Object.assign(kube, { api: async () => ({ core }) });
    assert.deepEqual(await kube.deleteNode("cp-4", "cp-1", { machineGone: true }), [
      "x/b: the server is currently unable to handle the request",
    ]);
    const failingList = {
      deleteNode: async () => undefined,
      listPodForAllNamespaces: async () => {
        throw new Error("connection refused");
      },
    };
    Object.assign(kube, { api: async () => ({ core: failingList }) });
    assert.deepEqual(await kube.deleteNode("cp-4", "cp-1", { machineGone: true }), [
      "listing its pods failed: connection refused",
    ]);
  });
});
