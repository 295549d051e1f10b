// The real edges of a run: the engine-backed stack and SSH access to the nodes.
import { EngineStack, type EngineStackOptions } from "../stack/edge";
import { checkProviderPlugins } from "../stack/plugins";
import { SshNodeAccess } from "./nodes";
import type { Edges } from "../core/edges";

export type EdgeOptions = EngineStackOptions;

export type EdgeFactory = (o: EdgeOptions) => Promise<Edges>;

export const openEdges: EdgeFactory = async (o) => {
  // A run that may `up` needs the provider's engine plugins, which molt never downloads
  // during a run: missing ones are refused here, before the stack is opened or changed.
  if (o.create !== false) checkProviderPlugins(o.config.intent.provider, o.env);
  const nodes = new SshNodeAccess(o.config.sshAccess);
  // A surge's new node is connected while its `up` finishes (edges/nodes.ts warm).
  const onNodeList = (s: Parameters<SshNodeAccess["warm"]>[0]) => nodes.warm(s);
  return { stack: await EngineStack.open({ ...o, onNodeList }), nodes };
};
