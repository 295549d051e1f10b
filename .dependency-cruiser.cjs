// The layers molt holds (npm run lint checks them): the core decides over plain data and
// imports nothing else; infra (the Pulumi program) sees only the core's types of the
// orchestrator; the CLI is the top; no module of the product reaches into tests; no cycles.
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: "no-circular",
      comment: "An import cycle: split the shared part (usually types) into a module both import.",
      severity: "error",
      from: {},
      to: { circular: true },
    },
    {
      name: "core-imports-only-core",
      comment: "orchestrator/core: the World, operations, planner, edge interfaces. Plain data, pure functions.",
      severity: "error",
      from: { path: "^orchestrator/core/" },
      to: { pathNot: "^orchestrator/core/" },
    },
    {
      name: "infra-sees-only-the-core",
      comment: "The Pulumi program (infra/) may use the core's types, never the orchestrator's edges or commands.",
      severity: "error",
      from: { path: "^infra/" },
      to: { path: "^orchestrator/", pathNot: "^orchestrator/core/" },
    },
    {
      name: "config-is-input",
      comment:
        "orchestrator/config: the stack file, validated and typed, and the program's input made from it; " +
        "it knows nothing of the run (edges, engine, leases, store, acts, commands).",
      severity: "error",
      from: { path: "^orchestrator/config/" },
      to: {
        path: "^orchestrator/((edges|stack|act|lease|backend|loop|adopt|report)/|(rollout|inspect|observe|disown)[.]ts$)",
      },
    },
    {
      name: "lease-below-the-commands",
      comment: "orchestrator/lease: the stack's lease and the lab's claim; the commands take them, never the reverse.",
      severity: "error",
      from: { path: "^orchestrator/lease/" },
      to: {
        path: "^orchestrator/((act|adopt|promotion|loop|report|run)/|(rollout|inspect|observe|disown|index)[.]ts$)",
      },
    },
    {
      name: "cli-is-the-top",
      comment: "Only the CLI imports the CLI; the library entry and the loop stay usable without it.",
      severity: "error",
      from: { path: "^(orchestrator|infra|lib)/", pathNot: "^orchestrator/cli/" },
      to: { path: "^orchestrator/cli/" },
    },
    {
      name: "lib-stands-alone",
      comment: "lib/ holds small helpers with no knowledge of molt.",
      severity: "error",
      from: { path: "^lib/" },
      to: { path: "^(orchestrator|infra)/" },
    },
    {
      name: "product-not-tests",
      severity: "error",
      from: { path: "^(orchestrator|infra|lib)/" },
      to: { path: "^(test|bench|chaos)/" },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "^(node_modules|dist)/" },
    // Type-only imports count: a cycle of types is still a cycle for a reader.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
  },
};
