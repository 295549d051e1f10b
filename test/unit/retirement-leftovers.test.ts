// What a retirement or a rollback that did not finish leaves behind, through the rollout loop
// with fake edges (test/support/fake-edges.ts): a node that stays with its control plane
// stopped; a failed new node a killed run had taken out of the load balancer.
import assert from "node:assert/strict";
import type { RolloutEvent } from "../../orchestrator/events";
import { rollout, type Summary } from "../../orchestrator/rollout";
import { FAKE_RETIRED_MANIFESTS, fakeEdges, FakeWorld, withFakeKube } from "../support/fake-edges";
import { fakeProject, tickingClock, writeLabStack, type FakeProject } from "../support/fake-project";

describe("a retirement that did not finish (fake edges)", function () {
  let project: FakeProject;
  let dir: string;

  before(() => {
    project = fakeProject("molt-leftovers-", {
      "k8s-v1.37.2": { kubernetesVersion: "v1.37.2", etcdVersion: "3.7.3" },
      "lab-v1": {},
      "lab-v2": {},
    });
    ({ dir } = project);
  });
  after(() => project.close());

  const stack = (image = "k8s-v1.37.2", joinSeconds = 300) =>
    writeLabStack(dir, "leftovers", {
      "molt:replicas": 3,
      "molt:image": image,
      "molt:timeouts": { settleSeconds: 5, joinSeconds },
    });

  const run = (w: FakeWorld, events: RolloutEvent[] = []): Promise<Summary> =>
    rollout({
      onEvent: (e) => events.push(e),
      stack: "lab",
      workDir: dir,
      env: project.envs.backend,
      edges: fakeEdges(w),
      pollMs: 1,
      now: tickingClock(),
    });

  it("a node that stays gets its moved-aside manifests back and its cordon lifted, then all is healthy", async () => {
    stack();
    // lab-cp-1 was drained and its control plane stopped to retire it; then the intent changed
    // so that it stays (every node is up to date now).
    const w = withFakeKube(FakeWorld.cluster(3, "k8s-v1.37.2"), "1.37.2");
    w.kube!.cordoned.add("lab-cp-1");
    w.kube!.stopped.add("lab-cp-1");
    const summary = await run(w);
    assert.equal(summary.result, "succeeded", summary.reason);
    assert.deepEqual(
      w.log.filter((l) => l.startsWith("kube ") || l.startsWith("up ")),
      [`kube restore-control-plane lab-cp-1 ${FAKE_RETIRED_MANIFESTS.join(",")}`, "kube uncordon lab-cp-1"],
    );
    assert.deepEqual([...w.kube!.stopped, ...w.kube!.cordoned], []);
    assert.equal((await run(w)).result, "noop");
  });

  it("a rollback killed after its new node left the load balancer goes on at once in the rerun", async () => {
    stack("lab-v2", 120);
    const w = FakeWorld.cluster(3, "lab-v1");
    w.lb = new Map();
    // The new node never passes the load balancer's check: rolled back after its join deadline,
    // out of the load balancer first (drain: false); the run dies right after that deregistration.
    w.faults.lbNeverHealthy = true;
    w.faults.crashAfterDeregister = true;
    const first = await run(w).catch((e: Error) => e);
    assert.ok(!(first instanceof Error) ? first.result === "failed" : /simulated crash/.test(first.message));
    assert.equal(w.lb.get("lab-cp-4"), "draining");
    assert.ok(w.machines.has("lab-cp-4"), "the killed run left the new node");
    const log = w.log.length;

    const events: RolloutEvent[] = [];
    const summary = await run(w, events);
    assert.equal(summary.result, "rolled-back", summary.reason);
    const decided = events.flatMap((e) => (e.type === "decision" ? [e.operation] : []));
    assert.deepEqual(
      decided.filter((o) => o.kind === "wait" || o.kind === "register-target"),
      [],
      "no new join deadline waited out, and the failed node is not put back",
    );
    assert.match(decided.find((o) => o.kind === "rollback")?.reason ?? "", /rollback an earlier run started/);
    assert.deepEqual(
      w.log.slice(log).filter((l) => !l.startsWith("etcd snapshot")),
      ["etcd memberRemove 4 via lab-cp-1", "up rollback lab-cp-4"],
    );
    assert.deepEqual(
      w.list.map((n) => `${n.name}:${n.image}`),
      ["lab-cp-1:lab-v1", "lab-cp-2:lab-v1", "lab-cp-3:lab-v1"],
    );
  });
});
