// ESLint: the recommended rules of ESLint and typescript-eslint, type-aware
// on the TypeScript sources (the plain-JS tools get the untyped rules).
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/", "node_modules/", ".readme/", "src/generated.ts"] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: { allowDefaultProject: ["*.js", "tools/*.mjs"] }, tsconfigRootDir: import.meta.dirname },
      globals: { process: "readonly", console: "readonly", fetch: "readonly", URL: "readonly", Buffer: "readonly", performance: "readonly" },
    },
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
    },
  },
  { files: ["**/*.js", "**/*.mjs"], ...tseslint.configs.disableTypeChecked },
);
