// Where a run's time goes: each change and each observation is timed into its phase, and
// every timed change is reported as a `phase` event.
import type { Phase, RolloutEvent } from "../events";
import type { OperationKind } from "../core/model";

export type Phases = Record<Phase | "molt", number>;

/** Times `fn` into `phase`; the phase failed if `fn` throws, or if `okOf` says its result is a failure. */
export type Timed = <T>(
  phase: Phase,
  op: OperationKind,
  node: string | undefined,
  fn: () => Promise<T>,
  okOf?: (result: T) => boolean,
) => Promise<T>;

export class RunClock {
  readonly started = Date.now();
  readonly phases: Phases = {
    observe: 0,
    provision: 0,
    etcd: 0,
    kube: 0,
    endpoint: 0,
    wait: 0,
    snapshot: 0,
    hook: 0,
    molt: 0,
  };

  constructor(private readonly emit: (e: RolloutEvent) => void) {}

  readonly timed: Timed = async (phase, op, node, fn, okOf) => {
    const t = Date.now();
    let ok = false;
    try {
      const r = await fn();
      ok = okOf ? okOf(r) : true;
      return r;
    } finally {
      const ms = Date.now() - t;
      this.phases[phase] += ms;
      if (phase !== "observe") this.emit({ type: "phase", phase, operation: op, ...(node ? { node } : {}), ms, ok });
    }
  };

  /** The wall time so far, and molt's own share: what no phase accounts for. */
  close(): { wallMs: number; phases: Phases } {
    const wallMs = Date.now() - this.started;
    const { observe, provision, etcd, kube, endpoint, wait, snapshot, hook } = this.phases;
    this.phases.molt = Math.max(0, wallMs - observe - provision - etcd - kube - endpoint - wait - snapshot - hook);
    return { wallMs, phases: { ...this.phases } };
  }
}
