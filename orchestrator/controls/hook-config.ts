// molt:hooks: commands run on the machine running molt around each replacement
// (orchestrator/act/hooks.ts runs them; plan/control-steps.ts decides when).
import { z } from "zod";
import type { HookName } from "../core/model";

export const HOOK_NAMES: readonly HookName[] = ["postJoin", "preRetire", "postRetire"];

export const DEFAULT_HOOK_TIMEOUT_SECONDS = 300;

export const hookSchema = z
  .object(
    {
      command: z
        .string({ message: "a shell command (sh -c) run on the machine running molt" })
        .trim()
        .min(1, "a shell command (sh -c) run on the machine running molt"),
      timeoutSeconds: z
        .number({ message: "seconds the hook may run" })
        .int("a whole number of seconds")
        .min(1, "at least 1")
        .max(86400, "at most 86400 (a day)")
        .optional(),
    },
    { message: "{ command, timeoutSeconds? }: a shell command run on the machine running molt" },
  )
  .strict();
