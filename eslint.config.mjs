// typescript-eslint's recommended rules over the sources; Prettier owns layout.
import eslint from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/", "node_modules/", "tools/lab/kubelet/", "**/*.mjs"] },
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
);
