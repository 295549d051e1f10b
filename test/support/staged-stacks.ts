// Two stacks of one project, staging and prod, on fake clusters (fake-edges.ts) with a real
// file backend each, for the promotion and staging unit suites: lab images, backends, stack
// files, MOLT_HOME, and a rollout of either stack. `close()` removes it all and gives
// MOLT_HOME back.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import { FileStore } from "../../orchestrator/backend/file";
import type { EdgeFactory } from "../../orchestrator/edges/open";
import type { RolloutEvent } from "../../orchestrator/events";
import { rollout, type Summary } from "../../orchestrator/rollout";
import { fakeEdges, type FakeWorld } from "./fake-edges";
import { fakeProject, tickingClock } from "./fake-project";

export type Stage = "staging" | "prod";

export interface StagedStacks {
  readonly dir: string;
  /** Each stack's environment: PULUMI_BACKEND_URL names its own file backend. */
  readonly envs: Record<Stage, Record<string, string>>;
  /** Staging's backend, where its verification records live. */
  readonly stagingStore: FileStore;
  /** Each stack's fake cluster, set by the suite. */
  readonly worlds: Record<string, FakeWorld>;
  readonly edges: EdgeFactory;
  stackFile(stack: string): string;
  /** A lab stack of 3 nodes on `image` (settleSeconds 1), with `extra` config keys. */
  writeStack(stack: string, image: string, extra?: Record<string, unknown>): void;
  /** A rollout of `stack` (prod with prod's backend, any other with staging's). */
  roll(stack: string, o?: { verify?: boolean }): Promise<{ summary: Summary; events: RolloutEvent[] }>;
  close(): void;
}

/**
 * `images`: the lab images (name to image.json's fields beside its name). `ticking`: the
 * rollout's clock moves a second at every reading (soaks and deadlines pass without waiting).
 */
export function stagedStacks(
  prefix: string,
  images: Record<string, Record<string, unknown>>,
  o: { ticking?: boolean } = {},
): StagedStacks {
  const project = fakeProject(prefix, images, ["staging-backend", "prod-backend"]);
  const dir = project.dir;
  const envs: Record<Stage, Record<string, string>> = {
    staging: project.envs["staging-backend"],
    prod: project.envs["prod-backend"],
  };
  const worlds: Record<string, FakeWorld> = {};
  const edges: EdgeFactory = async (e) => fakeEdges(worlds[e.stackName])(e);
  const stackFile = (stack: string) => join(dir, "stacks", `Pulumi.${stack}.yaml`);
  return {
    dir,
    envs,
    stagingStore: new FileStore(join(dir, "staging-backend")),
    worlds,
    edges,
    stackFile,
    writeStack: (stack, image, extra = {}) =>
      writeFileSync(
        stackFile(stack),
        stringify({
          config: {
            "molt:provider": "lab",
            "molt:replicas": 3,
            "molt:image": image,
            "molt:timeouts": { settleSeconds: 1 },
            "molt:lab": { name: stack, root: join(dir, "lab") },
            ...extra,
          },
        }),
      ),
    async roll(stack, r = {}) {
      const events: RolloutEvent[] = [];
      const summary = await rollout({
        stack,
        workDir: dir,
        env: stack === "prod" ? envs.prod : envs.staging,
        edges,
        pollMs: 1,
        ...(o.ticking ? { now: tickingClock() } : {}),
        onEvent: (e) => events.push(e),
        ...r,
      });
      return { summary, events };
    },
    close: () => project.close(),
  };
}
