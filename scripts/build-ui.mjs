// Builds the web dashboard (src/ui/) into dist/ui/, which the daemon serves and the package ships:
// one script bundle (Preact and the page code, esbuild), the stylesheet and the page. Run by
// `npm run build` after tsc, whose output it reads: the job spec's JSON Schema (the one `berth
// schema` prints) is compiled here into a validator module (ajv's standalone code), so that the
// page checks a spec as it is typed without eval (its Content-Security-Policy allows none).
import { copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv2020 } from 'ajv/dist/2020.js';
import standaloneCode from 'ajv/dist/standalone/index.js';
import { build } from 'esbuild';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'dist', 'ui');
const { jobSpecJsonSchema } = await import(join(root, 'dist', 'src', 'job-spec', 'validate.js'));

const ajv = new Ajv2020({ allErrors: true, strict: false, code: { source: true, esm: true } });
const validatorSource = standaloneCode.default(ajv, ajv.compile(jobSpecJsonSchema()));

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
await build({
  entryPoints: [join(root, 'src', 'ui', 'main.tsx')],
  bundle: true,
  format: 'esm',
  target: 'es2022',
  minify: true,
  legalComments: 'none',
  outfile: join(out, 'app.js'),
  jsx: 'automatic',
  jsxImportSource: 'preact',
  logLevel: 'warning',
  plugins: [
    {
      // The generated validator, imported by src/ui/spec-check.ts as `virtual:job-spec-validator`.
      name: 'job-spec-validator',
      setup(b) {
        b.onResolve({ filter: /^virtual:job-spec-validator$/ }, () => ({ path: 'job-spec-validator', namespace: 'berth' }));
        b.onLoad({ filter: /.*/, namespace: 'berth' }, () => ({ contents: validatorSource, loader: 'js', resolveDir: root }));
      },
    },
  ],
});
copyFileSync(join(root, 'src', 'ui', 'index.html'), join(out, 'index.html'));
copyFileSync(join(root, 'src', 'ui', 'app.css'), join(out, 'app.css'));
