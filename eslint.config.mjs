// typescript-eslint's recommended rules and some type-checked ones over the sources; Prettier owns layout.
import eslint from "@eslint/js";
import tseslint from "typescript-eslint";

const coreOnly = (pattern) => ({
  group: [pattern],
  message: "orchestrator/core imports nothing outside itself: move the type into the core, or the code out of it.",
});
// Any import that is not relative: an npm package or a Node built-in (I/O has no place in the core).
const packages = {
  regex: "^[^.]",
  message: "orchestrator/core imports no package: it is plain data and pure functions.",
};

export default tseslint.config(
  { ignores: ["dist/", "node_modules/", "tools/lab/kubelet/", "**/*.mjs", "**/*.cjs"] },
  eslint.configs.recommended,
  tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "no-constant-condition": ["error", { checkLoops: false }],
      // Prettier breaks code at 120 columns but never a string: long messages are split by hand.
      "max-len": ["error", { code: 120, ignoreUrls: true, ignoreRegExpLiterals: true }],
    },
  },
  // Type-checked rules for a codebase that is mostly async: a promise is awaited, handled, or
  // `void` with a comment saying why nobody waits; a switch over a union names every member, so
  // a new operation or event kind shows each place that must decide about it. Types come from
  // one program over tsconfig.json's files (`project`): in a CLI run it costs less CPU and
  // memory than `projectService`.
  {
    languageOptions: { parserOptions: { project: "./tsconfig.json", tsconfigRootDir: import.meta.dirname } },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": "error",
      "@typescript-eslint/await-thenable": "error",
      // `return promise` inside try/catch/finally: the catch misses it, the finally runs too early.
      "@typescript-eslint/return-await": ["error", "error-handling-correctness-only"],
      "@typescript-eslint/switch-exhaustiveness-check": ["error", { allowDefaultCaseForExhaustiveSwitch: false }],
    },
  },
  // orchestrator/core imports nothing outside itself (dependency-cruiser checks the whole graph
  // too, .dependency-cruiser.cjs): from core/*.ts a "../" leaves the core, from core/plan/*.ts "../../".
  {
    files: ["orchestrator/core/*.ts"],
    rules: { "no-restricted-imports": ["error", { patterns: [coreOnly("../*"), packages] }] },
  },
  {
    files: ["orchestrator/core/*/*.ts"],
    rules: { "no-restricted-imports": ["error", { patterns: [coreOnly("../../*"), packages] }] },
  },
);
