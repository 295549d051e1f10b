// The real edges of a run: the engine-backed stack and SSH access to the nodes.
import { EngineStack, type EngineStackOptions } from "../stack/edge";
import { checkProviderPlugins } from "../stack/plugins";
import { SshNodeAccess } from "./nodes";
import type { Edges } from "./types";

export type EdgeOptions = EngineStackOptions;

export type EdgeFactory = (o: EdgeOptions) => Promise<Edges>;

export const openEdges: EdgeFactory = async (o) => {
  // A run that may `up` needs the provider's engine plugins, which molt never downloads
  // during a run: missing ones are refused here, before the stack is opened or changed.
  if (o.create !== false) checkProviderPlugins(o.config.intent.provider, o.env);
  return { stack: await EngineStack.open(o), nodes: new SshNodeAccess(o.config.sshAccess) };
};
