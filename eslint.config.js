// The lint gate (part of `npm test`): typed rules that catch what tests miss in a daemon that must
// never die quietly (a floating promise is an unhandled rejection waiting to happen), plus unused
// code and consistent type-only imports.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'bench/results/**'] },
  js.configs.recommended,
  {
    files: ['**/*.{ts,tsx}'],
    extends: [...tseslint.configs.recommended],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { arguments: false } }],
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_', caughtErrors: 'none' },
      ],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      '@typescript-eslint/no-explicit-any': 'error',
    },
  },
  // The daemon's rooms (src/daemon/README.md): arrows run down only. daemon.ts builds everything;
  // control/ reads runs and money; runs/ uses the rooms below it; the leaf rooms use none of the others.
  ...roomRules([
    ['src/daemon/control/**', ['daemon.js']],
    ['src/daemon/runs/**', ['daemon.js', 'control']],
    ['src/daemon/task-end/**', ['daemon.js', 'control', 'runs', 'task-files']],
    ['src/daemon/task-files/**', ['daemon.js', 'control', 'runs']],
    [
      'src/daemon/{money,notify,inbound,cluster}/**',
      ['daemon.js', 'control', 'runs', 'task-end', 'task-files', 'money', 'notify', 'inbound', 'cluster'],
      true,
    ],
    // The home for instances is below them all: who holds an instance and what bills now is asked by
    // the money, the metrics and the runs alike.
    ['src/daemon/instances/**', ['daemon.js', 'control', 'runs', 'task-end', 'task-files', 'money', 'notify', 'inbound', 'cluster'], true],
  ]),
  {
    // Everything below the daemon is used by it and never reaches back up into it or the CLI.
    files: ['src/{client,store,sim,wire,job-spec,config,http,account,ssh}/**/*.ts', 'machines/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ group: ['**/daemon/**', '**/cli/**'], message: 'a lower layer never imports the daemon or the CLI' }] },
      ],
    },
  },
  {
    // The dashboard's page code (src/ui/) runs in a browser: it reads the wire contract's types and
    // the run states, never the daemon, the CLI, the store or anything that needs Node.
    files: ['src/ui/**/*.{ts,tsx}'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/daemon/**', '**/cli/**', '**/store/**', '**/client/**', '**/sim/**', '**/config/**', 'node:*'],
              message: 'the dashboard page runs in a browser: the wire contract only',
            },
          ],
        },
      ],
    },
  },
  {
    // The run machine is pure (machines/README.md): no service client, and no clock but the times it
    // is told (a list's listedAt, an actor's output or failure). Flat config replaces the rule above
    // for these files, so the lower-layer ban is repeated.
    files: ['machines/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['**/daemon/**', '**/cli/**'], message: 'a lower layer never imports the daemon or the CLI' },
            { group: ['**/client/**'], message: 'the run machine is pure: an actor hands it what the client said' },
          ],
        },
      ],
      'no-restricted-syntax': [
        'error',
        { selector: "CallExpression[callee.object.name='Date'][callee.property.name='now']", message: 'the run machine reads no clock' },
        { selector: "NewExpression[callee.name='Date']", message: 'the run machine reads no clock' },
        {
          selector: "CallExpression[callee.object.name='performance'][callee.property.name='now']",
          message: 'the run machine reads no clock',
        },
      ],
    },
  },
  {
    // Who holds an instance and what bills now is decided in one place (src/daemon/instances/holdings.ts):
    // nothing else in the daemon prices an attempt, reads the attempts that may bill, or classifies
    // a listed instance, so a new kind of hold (a warm instance) changes one module.
    files: ['src/daemon/**/*.ts'],
    ignores: ['src/daemon/instances/holdings.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: 'ImportSpecifier[imported.name=/^(attemptPrice|attemptSpend|billedDph)$/]',
          message: 'what an instance bills is asked of src/daemon/instances/holdings.ts',
        },
        {
          selector: "MemberExpression[property.name='billingSince']",
          message: 'what bills now is asked of src/daemon/instances/holdings.ts (billsSince, billingNow)',
        },
        {
          selector: "ImportSpecifier[imported.name='parseLabel']",
          message: 'who holds an instance is asked of src/daemon/instances/holdings.ts (classifyInstance)',
        },
      ],
    },
  },
  {
    // Tests read parsed JSON bodies of many shapes; the shipped code may not use `any`.
    files: ['test/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly' } },
  },
);

/**
 * One rule per room: `banned` lists the sibling rooms (and the root) a room's files may not import.
 * A leaf room (`leaf`) may still import its own files (./x.js) but no other room.
 */
function roomRules(rooms) {
  return rooms.map(([files, banned, leaf]) => ({
    files: [files.endsWith('**') ? `${files}/*.ts` : files],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: banned.flatMap((room) => (room.endsWith('.js') ? [`../${room}`] : [`../${room}/*`])),
              message: leaf ? 'a leaf room of the daemon imports no other room' : 'a room of the daemon never imports a room above it',
            },
          ],
        },
      ],
    },
  }));
}
