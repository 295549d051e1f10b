// What a rollout tells its caller, as a discriminated union (CLI --json prints one per line).
import type { RolloutResultKind } from "./core/model";
import type { HookName, Operation, OperationKind } from "./core/model";
import type { PromotionEvent } from "./promotion/events";
import type { OpenWindow } from "./controls/window";

export type Phase = "observe" | "provision" | "etcd" | "kube" | "endpoint" | "wait" | "snapshot" | "hook";

export interface NodeView {
  name: string;
  image: string;
  kubernetesVersion?: string;
  generation: number;
  member?: { id: string; learner: boolean; leader: boolean; healthy: boolean; appliedIndex?: string };
  outdated: boolean;
  /** Kubernetes: the Node's readiness and cordon, the API server's version, and all components healthy. */
  kube?: { nodeReady: boolean; cordoned: boolean; apiserverVersion?: string; healthy: boolean };
}

export type RolloutEvent =
  /** Releases and their verification (orchestrator/promotion/). */
  | PromotionEvent
  | {
      type: "start";
      stack: string;
      command: string;
      provider: string;
      replicas: number;
      image: string;
      kubernetesVersion?: string;
      /** molt:rollout.window: the window this run started in and when it closes. */
      window?: OpenWindow;
      time: string;
    }
  | {
      type: "lock";
      where: string;
      /**
       * "backend": every runner sharing the backend sees the lease; "cluster": the cluster's
       * etcd holds it; "cluster-pending": the stack has no cluster yet (this machine's lease
       * until its first node's etcd can hold it); "machine": only this machine.
       */
      scope: "backend" | "cluster" | "cluster-pending" | "machine";
      ttlSeconds: number;
      runId: string;
      engineBound: boolean;
    }
  | {
      type: "lock-recovered";
      previousPid: number;
      previousStartedAt: string;
      previousHost: string;
      previousRunId?: string;
      /** "process-gone": its process died on this machine; "expired": not renewed for its time to live. */
      reason: "process-gone" | "expired";
      silentSeconds?: number;
    }
  | { type: "lock-renew-failed"; message: string }
  /** The lease was lost: the run stops at its next boundary (a running `up` is interrupted). */
  | { type: "lock-lost"; message: string }
  /** Giving the lease up failed (e.g. the backend is unreachable): it expires by itself after its time to live. */
  | { type: "lock-release-failed"; message: string }
  | { type: "engine-lock-cleared"; locks: { host: string; pid: number; since: string }[] }
  | { type: "pending-cleared"; operations: { urn: string; operation: string; reason: string }[] }
  | {
      /** Machines under molt's tags for this cluster that the state does not hold (orchestrator/leaks.ts). */
      type: "leaked-machines";
      where: string;
      machines: {
        id: string;
        node?: string;
        address?: string;
        state: string;
        launchedAt?: string;
        /**
         * terminate: would be (the start's report never terminates); terminated; kept (see reason);
         * terminate-failed: --terminate-leaked tried and the cloud refused (reason: its error).
         */
        action: "terminate" | "terminated" | "kept" | "terminate-failed";
        reason?: string;
      }[];
    }
  | {
      /** Engine processes a killed run left (an engine still updating, provider plugins): stopped before acting. */
      type: "engine-leftovers";
      processes: { pid: number; command: string; kind: "engine" | "plugin"; how: "stopped" | "killed" }[];
    }
  | { type: "observed"; pass: number; nodes: NodeView[]; ms: number }
  | { type: "decision"; pass: number; operation: Operation }
  | { type: "phase"; phase: Phase; operation: OperationKind; node?: string; ms: number; ok: boolean; detail?: string }
  | { type: "snapshot"; path: string; bytes: number; node: string }
  /** Older etcd backups of the stack removed after this run's (molt:backups.keep). */
  | { type: "backups-pruned"; stack: string; keep: number; removed: string[] }
  | { type: "engine"; line: string }
  /** An engine resource step of an `up` (live progress): `op` is the engine's (create, delete, ...). */
  | { type: "resource"; op: string; resource: string; kind: string; status: "started" | "done" | "failed" }
  /** Something that did not stop the run but must not pass silently (a teardown skipped or tolerated). */
  | { type: "warning"; node?: string; message: string }
  /**
   * A line a hook printed (stdout or stderr), as it comes: redacted, cut at 2 KiB, the first
   * 1000 lines of a run (controls/hooks.ts HOOK_OUTPUT_LIMITS).
   */
  | { type: "hook-output"; hook: HookName; node: string; line: string }
  /**
   * A hook finished: its result, how it failed (`error`, molt's words: "exited 3", "timed out
   * after 15s") and its output (redacted, the last 8 KiB; a callback's: its rejection's message).
   */
  | {
      type: "hook";
      hook: HookName;
      node: string;
      /** "command": molt:hooks; "callback": the library's RolloutOptions.hooks. */
      source: "command" | "callback";
      ok: boolean;
      ms: number;
      output: string;
      error?: string;
    }
  /** An adopted machine was retired: reset, released, and left running for its owner to delete. */
  | { type: "left-for-owner"; node: string; address: string; ssh: string; providerId?: string; done: string[] }
  /** An adopted machine taken into the stack (`molt adopt --import`) was retired and destroyed. */
  | { type: "adopted-destroyed"; node: string; address: string; machine: string; done: string[] }
  | {
      type: "summary";
      result: RolloutResultKind;
      reason: string;
      stack: string;
      wallMs: number;
      operations: number;
      phases: Record<Phase | "molt", number>;
      nodes: NodeView[];
      snapshotPath?: string;
      /** Nodes this run retired (their etcd member removed), in order: the replacements done. */
      replaced: string[];
      /** Adopted machines this run retired: reset and left running, yours to delete. */
      leftForOwner?: Omit<Extract<RolloutEvent, { type: "left-for-owner" }>, "type">[];
    };
