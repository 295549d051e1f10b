// molt's exit codes (part of its interface; the table is in cli/main.ts's header) and how
// a run's summary or error maps to one, printed as the last line or event.
import { OutsideWindowError } from "../controls/window";
import { InvalidConfigError } from "../config";
import { ConcurrentRolloutError } from "../lease/bucket";
import { ClusterLockUnavailableError } from "../lease/cluster";
import { AnotherUpdateInProgressError, StateChangedByAnotherRunError } from "../stack/state-changed";
import { EngineLockedError } from "../stack/engine-lock";
import { CorruptStateError } from "../stack/state";
import { RefusedError, type Summary } from "../rollout";
import { BackendError, classifyEngineError, PassphraseError, StackNotFoundError } from "../stack/driver";
import { EngineMissingError } from "../stack/engine";
import { PluginMissingError } from "../stack/plugins";
import { LabHostError } from "../../infra/lab/host";
import {
  AdoptionRefusedError,
  HostKeysNotConfirmedError,
  InvalidAdoptionInputError,
  InvalidHostKeyInputError,
} from "../adopt";
import { PromotionNotConfirmedError, PromotionRefusedError } from "../promotion/errors";
import { redactText } from "../report/redact";
import { DisownRefusedError } from "../disown";

export const EXIT = {
  ok: 0,
  unexpected: 1,
  invalid: 2,
  locked: 3,
  rolledBack: 4,
  paused: 5,
  notConfirmed: 6,
  failed: 7,
  outsideWindow: 8,
  cancelled: 130,
} as const;

/** A --metrics-file or --notify value that cannot work: bad input, nothing is changed. */
export class InvalidOptionError extends Error {
  constructor(message: string) {
    super(`${message}; nothing was changed`);
    this.name = "InvalidOptionError";
  }
}

/** A rollout that may not ask (no terminal, or --json) and was not given --yes. */
export class NotConfirmedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "NotConfirmedError";
  }
}

export function exitFor(s: Summary): number {
  switch (s.result) {
    case "succeeded":
    case "noop":
      return EXIT.ok;
    case "refused":
      return EXIT.invalid;
    case "rolled-back":
      return EXIT.rolledBack;
    case "paused":
      return EXIT.paused;
    case "cancelled":
      return s.reason.startsWith("not confirmed") ? EXIT.notConfirmed : EXIT.cancelled;
    case "failed":
      return EXIT.failed;
  }
}

export function errorExit(e: unknown, json: boolean, stack?: string): number {
  // The engine's refusals of a backend or a passphrase are bad input wherever they show.
  if (stack !== undefined)
    e = classifyEngineError(e, stack, process.env.PULUMI_BACKEND_URL ?? "the default backend (~/.molt/state)");
  const known: [new (...a: never[]) => Error, number][] = [
    [InvalidConfigError, EXIT.invalid],
    [StackNotFoundError, EXIT.invalid],
    [CorruptStateError, EXIT.invalid],
    [EngineMissingError, EXIT.invalid],
    [PluginMissingError, EXIT.invalid],
    [BackendError, EXIT.invalid],
    [PassphraseError, EXIT.invalid],
    [RefusedError, EXIT.invalid],
    [LabHostError, EXIT.invalid],
    [InvalidAdoptionInputError, EXIT.invalid],
    [InvalidHostKeyInputError, EXIT.invalid],
    [AdoptionRefusedError, EXIT.invalid],
    [HostKeysNotConfirmedError, EXIT.notConfirmed],
    [ConcurrentRolloutError, EXIT.locked],
    [ClusterLockUnavailableError, EXIT.locked],
    [StateChangedByAnotherRunError, EXIT.locked],
    [AnotherUpdateInProgressError, EXIT.locked],
    [EngineLockedError, EXIT.locked],
    [NotConfirmedError, EXIT.notConfirmed],
    [PromotionRefusedError, EXIT.invalid],
    [PromotionNotConfirmedError, EXIT.notConfirmed],
    [OutsideWindowError, EXIT.outsideWindow],
    [InvalidOptionError, EXIT.invalid],
    [DisownRefusedError, EXIT.invalid],
  ];
  const code = known.find(([cls]) => e instanceof cls)?.[1] ?? EXIT.unexpected;
  const message = redactText(e instanceof Error ? e.message : String(e));
  if (json)
    process.stdout.write(
      JSON.stringify({ type: "error", error: (e as Error)?.name ?? "Error", message, exitCode: code }) + "\n",
    );
  else process.stderr.write(`molt: ${message}\n`);
  return code;
}
