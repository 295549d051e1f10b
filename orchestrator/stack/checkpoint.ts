// Whether a stack has a checkpoint in its backend, read from the backend's objects without
// starting the engine. The engine's first command on a folder or bucket without stacks
// writes `.pulumi/meta.yaml` (the state layout it chose); a read-only command (plan,
// status) asks here first, so on a backend without the stack it writes nothing.
import type { ObjectStore } from "../backend/object-store";

/**
 * True when the backend's store holds a checkpoint named for `stack` (any project, either
 * layout, gzipped or not), false when it holds none, undefined when molt cannot look (a
 * backend with no object store of molt's: Pulumi Cloud, gs://): then only the engine knows.
 */
export async function checkpointExists(store: ObjectStore | undefined, stack: string): Promise<boolean | undefined> {
  if (!store) return undefined;
  // The project layout (meta.yaml version 1): .pulumi/stacks/<project>/<stack>.json; the
  // legacy one: .pulumi/stacks/<stack>.json.
  const named = new RegExp(`^\\.pulumi/stacks/(?:[^/]+/)?${stack.replace(/[.]/g, "\\.")}\\.json(?:\\.gz)?$`);
  return (await store.list(".pulumi/stacks/")).some((k) => named.test(k));
}
