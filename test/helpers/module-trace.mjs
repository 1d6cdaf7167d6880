// `node --import ./test/helpers/module-trace.mjs ...`: appends the URL of every module the process
// resolves to the file named by MODULE_TRACE, one a line (for tests of what a command loads).
import { register } from 'node:module';

register(
  `data:text/javascript,${encodeURIComponent(`
    import { appendFileSync } from 'node:fs';
    export async function resolve(specifier, context, next) {
      const resolved = await next(specifier, context);
      appendFileSync(process.env.MODULE_TRACE, resolved.url + '\\n');
      return resolved;
    }
  `)}`,
);
