// The real edges of a run: the engine-backed stack and SSH access to the nodes.
import type { StackConfig } from "../config";
import type { RolloutEvent } from "../events";
import { EngineStack } from "../stack/edge";
import { checkProviderPlugins } from "../stack/plugins";
import { SshNodeAccess } from "./nodes";
import type { Edges } from "./types";

export interface EdgeOptions {
  stackName: string;
  workDir: string;
  env?: Record<string, string>;
  backend: string;
  config: StackConfig;
  /** Create the stack when missing (a rollout does; plan and status do not). */
  create?: boolean;
  report?: (e: RolloutEvent) => void;
  engineOutput?: boolean;
  engineLockDeadlineSeconds?: number;
  /** The run's cancel: an engine step in flight gets the engine's graceful cancel. */
  signal?: AbortSignal;
  /** Tag the engine's processes as this stack's run (a later run stops any left over). */
  tagProcesses?: boolean;
}

export type EdgeFactory = (o: EdgeOptions) => Promise<Edges>;

export const openEdges: EdgeFactory = async (o) => {
  // A run that may `up` needs the provider's engine plugins, which molt never downloads
  // during a run: missing ones are refused here, before the stack is opened or changed.
  if (o.create !== false) checkProviderPlugins(o.config.intent.provider, o.env);
  return { stack: await EngineStack.open(o), nodes: new SshNodeAccess() };
};
