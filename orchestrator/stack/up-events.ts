// What one `up` did, read from the engine's own event stream (the Automation API's
// onEvent) rather than from an export of the state afterwards: which resources each
// finished step created, deleted or left, which steps failed, and the stack's outputs as
// the engine registered them. A record is complete only when the engine's summary arrived
// with no failed step: anything less and the caller reads the state instead. (A cancelled
// `up` throws before its record is read, a failed one throws UpFailedError with it; the
// engine ends every stream with a `cancelEvent`, which is the end of the stream, not a cancel.)
import type { EngineEvent, OpType } from "@pulumi/pulumi/automation";
import type { NodeEndpoint } from "../core/nodes";

export interface UpRecord {
  /** URNs a finished step made: create, create-replacement, import. */
  created: ReadonlySet<string>;
  /** URNs a finished step removed from the state: delete, delete-replaced, discard. */
  deleted: ReadonlySet<string>;
  /** Every URN a step finished on (same, update, ... included). */
  finished: ReadonlySet<string>;
  /** URNs a finished step did anything to but leave them the same. */
  changed: ReadonlySet<string>;
  /** URNs whose step failed. */
  failed: readonly string[];
  /** The root stack resource's outputs (secret values are masked by the engine), when it registered them. */
  stackOutputs?: Record<string, unknown>;
  /** The summary arrived and no step failed. */
  complete: boolean;
}

const CREATES: readonly OpType[] = ["create", "create-replacement", "import", "import-replacement"];
const DELETES: readonly OpType[] = ["delete", "delete-replaced", "discard", "discard-replaced"];

/** Collects one `up`'s events; `onEvent` goes to `stack.up({ onEvent })`. */
export class UpRecorder {
  private readonly created = new Set<string>();
  private readonly deleted = new Set<string>();
  private readonly finished = new Set<string>();
  private readonly changed = new Set<string>();
  private readonly failed: string[] = [];
  private stackOutputs?: Record<string, unknown>;
  private summary = false;

  readonly onEvent = (e: EngineEvent): void => {
    if (e.summaryEvent) this.summary = true;
    const failed = e.resOpFailedEvent?.metadata;
    if (failed) this.failed.push(failed.urn);
    const done = e.resOutputsEvent;
    if (!done || done.planning) return;
    const m = done.metadata;
    this.finished.add(m.urn);
    if (m.op !== "same") this.changed.add(m.urn);
    if (CREATES.includes(m.op)) this.created.add(m.urn);
    if (DELETES.includes(m.op)) this.deleted.add(m.urn);
    if (m.type === "pulumi:pulumi:Stack" && m.new?.outputs) this.stackOutputs = m.new.outputs;
  };

  record(): UpRecord {
    return {
      created: this.created,
      deleted: this.deleted,
      finished: this.finished,
      changed: this.changed,
      failed: this.failed,
      ...(this.stackOutputs ? { stackOutputs: this.stackOutputs } : {}),
      complete: this.summary && this.failed.length === 0,
    };
  }
}

/** The resources of `nodeResources` a complete record does not show deleted (all of them when it is incomplete). */
export function notShownDeleted(record: UpRecord, nodeResources: readonly string[]): string[] {
  if (!record.complete) return [...nodeResources];
  return nodeResources.filter((u) => !record.deleted.has(u));
}

/**
 * A new node's endpoint, from the event of its node component registering its outputs
 * (every provider's `molt:<provider>:ControlPlaneNode` registers privateAddress, sshHost,
 * sshPort, hostPublicKey, providerId): the lab's as soon as its machine answers, a cloud's
 * once its host key is known. Only a created component named as one of `names`, with every
 * field well-formed; anything else is undefined (the stack's outputs say it later).
 */
export function createdNodeEndpoint(e: EngineEvent, names: readonly string[]): NodeEndpoint | undefined {
  const done = e.resOutputsEvent;
  if (!done || done.planning) return undefined;
  const m = done.metadata;
  if (!CREATES.includes(m.op) || !/^molt:[a-z]+:ControlPlaneNode$/.test(m.type)) return undefined;
  const name = m.urn.slice(m.urn.lastIndexOf("::") + 2);
  if (!names.includes(name)) return undefined;
  const o = (m.new?.outputs ?? {}) as Record<string, unknown>;
  const text = (k: string) => (typeof o[k] === "string" && o[k] !== "" ? (o[k] as string) : undefined);
  const [privateAddress, sshHost, hostPublicKey, providerId] = [
    text("privateAddress"),
    text("sshHost"),
    text("hostPublicKey"),
    text("providerId"),
  ];
  const sshPort = o.sshPort;
  if (!privateAddress || !sshHost || !hostPublicKey || !providerId) return undefined;
  if (typeof sshPort !== "number" || !Number.isInteger(sshPort) || sshPort < 1 || sshPort > 65535) return undefined;
  return { name, privateAddress, sshHost, sshPort, hostPublicKey, providerId };
}

/**
 * An `up` that ran and failed (not a cancel): the engine's message, and what its events
 * showed it do before it failed, so a caller can tell which part of a change happened.
 */
export class UpFailedError extends Error {
  constructor(
    message: string,
    readonly record: UpRecord,
  ) {
    super(message);
    this.name = "UpFailedError";
  }
}
