// typescript-eslint's recommended rules over the sources; Prettier owns layout.
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
