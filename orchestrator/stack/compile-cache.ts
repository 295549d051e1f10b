// Preloaded (NODE_OPTIONS --require, set by stack/engine.ts) into the node processes the
// engine starts: the dynamic provider of each `up`. With NODE_COMPILE_CACHE set, node keeps
// V8's compiled code of the modules it loads, but writes it only when the process exits
// normally, and the engine kills its plugins at the end of an update: the cache would stay
// empty. So it is written once the provider has loaded its modules, which is when it prints
// its port on stdout for the engine.
import * as nodeModule from "node:module";

const m = nodeModule as unknown as { getCompileCacheDir?: () => string | undefined; flushCompileCache?: () => void };
if (m.getCompileCacheDir?.() && m.flushCompileCache) {
  const write = process.stdout.write.bind(process.stdout) as (...a: unknown[]) => boolean;
  let flushed = false;
  process.stdout.write = ((...args: unknown[]) => {
    const r = write(...args);
    if (!flushed) {
      flushed = true;
      setImmediate(() => m.flushCompileCache!());
    }
    return r;
  }) as typeof process.stdout.write;
}
