// Dynamic providers are serialized into the stack state and run later in a separate
// process (for deletes, even by a later molt run). They therefore carry no code of their
// own: each method loads molt's current implementation from the directory the stack
// driver names in MOLT_DIST. State never holds a path, and a fix in molt reaches every
// existing resource.
//
// This function is serialized by value; it must only use globals.
export function implementation(module: string) {
  const dist = process.env.MOLT_DIST;
  if (!dist) {
    throw new Error(
      "MOLT_DIST is not set: molt's dynamic providers run only through molt's stack driver " +
        "(npm run rollout / molt status), which sets it to molt's dist/ directory",
    );
  }
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require(require("path").join(dist, module));
}
