// `stack.up()` of the Automation API runs two more engine commands after the update
// (`stack output` twice, for the outputs and their secret flags, and `stack history` for
// a summary): three more process starts of the engine, each loading and decrypting the
// state, for facts molt takes from the update's own event stream (stack/up-events.ts).
// This runs the same `up` (the same arguments, program server and event stream) without
// them: the returned result has no outputs and no summary.
import type { Stack, UpOptions } from "@pulumi/pulumi/automation";

export interface LeanUpResult {
  stdout: string;
  stderr: string;
}

export async function upWithoutReadback(stack: Stack, opts: UpOptions): Promise<LeanUpResult> {
  // The stack's own `up`, called on an object whose read-back methods answer nothing;
  // everything else (workspace, name, event log, command runner) is the stack's.
  const lean = Object.create(stack, {
    outputs: { value: async () => ({}) },
    info: { value: async () => undefined },
  }) as Stack;
  const r = await lean.up(opts);
  return { stdout: r.stdout, stderr: r.stderr };
}
