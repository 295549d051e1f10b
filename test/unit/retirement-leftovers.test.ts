// What a retirement that did not finish leaves behind, through the rollout loop with fake
// edges (test/support/fake-edges.ts): a node that stays with its control plane stopped.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import { rollout, type Summary } from "../../orchestrator/rollout";
import { FAKE_RETIRED_MANIFESTS, fakeEdges, FakeWorld, withFakeKube } from "../support/fake-edges";
import { fakeProject, tickingClock, type FakeProject } from "../support/fake-project";

describe("a retirement that did not finish (fake edges)", function () {
  let project: FakeProject;
  let dir: string;

  before(() => {
    project = fakeProject("molt-leftovers-", {
      "k8s-v1.37.2": { kubernetesVersion: "v1.37.2", etcdVersion: "3.7.3" },
    });
    ({ dir } = project);
  });
  after(() => project.close());

  function stack(): void {
    writeFileSync(
      join(dir, "stacks", "Pulumi.lab.yaml"),
      stringify({
        config: {
          "molt:provider": "lab",
          "molt:replicas": 3,
          "molt:image": "k8s-v1.37.2",
          "molt:timeouts": { settleSeconds: 5 },
          "molt:lab": { name: "leftovers", root: join(dir, "lab") },
        },
      }),
    );
  }

  const run = (w: FakeWorld): Promise<Summary> =>
    rollout({
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
});
