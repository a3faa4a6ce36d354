// @ts-check
// ESLint (typescript-eslint's recommended rules) over src/, test/ and scripts/; `npm run lint`, part of
// `npm run typecheck` and so of CI. Formatting is Prettier's (.prettierrc.json), checked on the files it owns.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'media/**', '**/*.d.ts'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { console: 'readonly', process: 'readonly', Buffer: 'readonly', __dirname: 'readonly', __filename: 'readonly',
      require: 'readonly', module: 'writable', setTimeout: 'readonly', clearTimeout: 'readonly', setInterval: 'readonly', clearInterval: 'readonly',
      setImmediate: 'readonly', performance: 'readonly', URL: 'readonly', TextEncoder: 'readonly', TextDecoder: 'readonly', AbortController: 'readonly',
      AbortSignal: 'readonly', fetch: 'readonly', structuredClone: 'readonly', queueMicrotask: 'readonly', WebAssembly: 'readonly',
      document: 'readonly', window: 'readonly', navigator: 'readonly', HTMLElement: 'readonly', customElements: 'readonly',
      requestAnimationFrame: 'readonly', ResizeObserver: 'readonly', getComputedStyle: 'readonly', Blob: 'readonly', Event: 'readonly',
      KeyboardEvent: 'readonly', MouseEvent: 'readonly', CustomEvent: 'readonly', acquireVsCodeApi: 'readonly' } },
    rules: {
      // unused names are errors, except a leading underscore (an argument an interface requires) and rest siblings
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none', ignoreRestSiblings: true }],
      'no-empty': ['error', { allowEmptyCatch: true }],
      // the tests match table and log lines whose spaces are the text itself
      'no-regex-spaces': 'off',
    },
  },
  {
    // Size guards on the product, as warnings: a function that no longer fits a screen or a file over 500 lines is a
    // room to split. A file that stays longer says why in its first lines (test/unit/architecture.test.ts checks that).
    files: ['src/**/*.ts'],
    rules: {
      'max-lines-per-function': ['warn', { max: 80 }],
      'max-lines': ['warn', { max: 500 }],
    },
  },
);
