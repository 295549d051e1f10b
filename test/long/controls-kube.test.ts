// Hooks on a Kubernetes stack (issue #18), on the lab (t24) with real kubeadm-made control
// planes: the postJoin hook checks the new node's API server and Node through the
// KUBECONFIG molt hands it (the cluster's admin.conf, 0600, only while it runs), preRetire
// sees the node to retire, and --max-replacements 1 stops the roll after one node.
// Outside `npm test` (a Kubernetes cluster takes minutes): `npm run test:long`.
import * as assert from "node:assert/strict";
import { inspect } from "../../orchestrator/inspect";
import { runCli, summaryOf } from "../support/cli";
import { cliSuite, type CliSuite } from "../support/cli-suite";
import { labStackYaml, testLab } from "../support/lab";
import { parse, stringify } from "yaml";

const lab = testLab(24);
const STACK = "ctlk";

const POST_JOIN =
  'test "$(stat -c %a "$KUBECONFIG")" = 600 && ' +
  'kubectl get --raw "/readyz" && echo && ' +
  'kubectl get node "$MOLT_NODE" -o jsonpath=\'{.status.conditions[?(@.type=="Ready")].status}\' | grep -qx True && ' +
  'echo "API ready, Node $MOLT_NODE Ready"';
const PRE_RETIRE = 'kubectl get node "$MOLT_NODE" -o name && echo "about to retire $MOLT_NODE"';

describe("hooks on a Kubernetes stack (long, lab t24)", function () {
  let suite: CliSuite;
  const figures: Record<string, number> = {};
  const conf = (image: string, hooks?: Record<string, unknown>) => {
    const doc = parse(labStackYaml(lab, { image, joinSeconds: 240, settleSeconds: 60, drainSeconds: 120 })) as {
      config: Record<string, unknown>;
    };
    if (hooks) doc.config["molt:hooks"] = hooks;
    return stringify(doc);
  };
  const rollout = (...extra: string[]) => runCli(["rollout", "--stack", STACK, "--yes", "--json", ...extra], suite.env);

  before(async function () {
    this.timeout(600_000);
    suite = cliSuite("molt-ctlk-", STACK, lab);
    suite.wd.writeStackConfig(STACK, conf("k8s-v1.37.2"));
    const t = Date.now();
    const run = await rollout();
    figures.createSeconds = Math.round((Date.now() - t) / 1000);
    assert.equal(run.code, 0, run.stderr + run.stdout.slice(-3000));
  });
  after(async function () {
    this.timeout(600_000);
    console.log("    controls-kube figures:", JSON.stringify(figures));
    await suite.teardown();
  });

  it("postJoin checks the API server and Node through KUBECONFIG; preRetire runs; paused after one", async () => {
    suite.wd.writeStackConfig(
      STACK,
      conf("k8s-v1.37.2-os2", {
        postJoin: { command: POST_JOIN, timeoutSeconds: 60 },
        preRetire: { command: PRE_RETIRE, timeoutSeconds: 60 },
      }),
    );
    const t = Date.now();
    const run = await rollout("--max-replacements", "1");
    figures.oneReplacementSeconds = Math.round((Date.now() - t) / 1000);
    assert.equal(run.code, 5, run.stderr + run.stdout.slice(-3000));
    const hooks = run.events.filter((e) => e.type === "hook") as {
      hook: string;
      node: string;
      ok: boolean;
      output: string;
    }[];
    assert.deepEqual(
      hooks.map((h) => `${h.hook} ${h.node} ${h.ok}`),
      ["postJoin ctlk-cp-4 true", "preRetire ctlk-cp-1 true"],
    );
    assert.match(hooks[0].output, /^ok$/m, "kube-apiserver /readyz through the hook's KUBECONFIG");
    assert.match(hooks[0].output, /API ready, Node ctlk-cp-4 Ready/);
    assert.match(hooks[1].output, /node\/ctlk-cp-1\nabout to retire ctlk-cp-1/);
    // postJoin came before anything touched the old node; preRetire before its drain.
    const kinds = run.events
      .filter((e) => e.type === "decision")
      .map((e) => {
        const op = e.operation as { kind: string; hook?: string; node?: string };
        return op.kind === "hook" ? `hook:${op.hook}` : op.kind;
      });
    assert.ok(kinds.indexOf("hook:postJoin") < kinds.indexOf("hook:preRetire"));
    assert.ok(kinds.indexOf("hook:preRetire") < kinds.indexOf("drain"), kinds.join(" "));
    assert.deepEqual(summaryOf(run).replaced, ["ctlk-cp-1"]);
    const i = await inspect({ stack: STACK, workDir: suite.wd.dir, env: suite.env });
    assert.deepEqual(
      i.nodes.map((n) => `${n.name}:${n.image}`),
      ["ctlk-cp-2:k8s-v1.37.2", "ctlk-cp-3:k8s-v1.37.2", "ctlk-cp-4:k8s-v1.37.2-os2"],
    );
    assert.ok(i.nodes.every((n) => n.member?.healthy && n.kube?.healthy && !n.kube.cordoned));
  });
});
