// The run's own controls on top of the stack's intent: --max-replacements and the library's
// hook callbacks (a callback without a molt:hooks command still makes the planner ask for it).
import { InvalidConfigError } from "../config";
import type { HookName, Intent } from "../core/model";
import { DEFAULT_HOOK_TIMEOUT_SECONDS } from "./hook-config";
import type { HookCallbacks } from "./hooks";

export type { HookCallbacks };

export function controlsIntent(intent: Intent, o: { maxReplacements?: number; hooks?: HookCallbacks }): Intent {
  const max = o.maxReplacements;
  if (max !== undefined && (!Number.isInteger(max) || max < 1))
    throw new InvalidConfigError("--max-replacements", [
      `--max-replacements: ${JSON.stringify(max)} is not a whole number of at least 1 (the replacements this run ` +
        `may do before it stops, paused)`,
    ]);
  const callbacks = Object.keys(o.hooks ?? {}).filter((h) => o.hooks?.[h as HookName]) as HookName[];
  const hooks = { ...intent.hooks };
  for (const h of callbacks) hooks[h] ??= { timeoutSeconds: DEFAULT_HOOK_TIMEOUT_SECONDS };
  return {
    ...intent,
    rollout: { ...intent.rollout, ...(max !== undefined ? { maxReplacements: max } : {}) },
    ...(Object.keys(hooks).length ? { hooks } : {}),
  };
}
