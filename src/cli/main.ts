// The `berth` command line: parse, call, print. Each subcommand lives in ./commands/; this file
// wires them to commander and turns whatever they throw into one sentence on stderr and the exit
// code of docs/cli.md (see ./exit-codes.ts).
//
// A command's code is imported when it runs, never before: `berth status` and `berth --version`
// must not load the daemon, the simulator, xstate, pino, zod or SQLite (npm run bench, section cli).
import { readFileSync } from 'node:fs';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { BerthError, SpecError } from '../errors.js';
import { packagePath } from '../package-path.js';
import { EXIT, exitCodeFor } from './exit-codes.js';
import { isSystemError, systemErrorSentence } from './system-errors.js';
import { processIo, safeText, type Io } from './io.js';
import { specProblems } from './render.js';

const EXIT_CODES_HELP = `
Exit codes: 0 success; 1 the run failed or was cancelled (with --wait); 2 bad usage or invalid job
spec (nothing is submitted); 3 daemon not reachable; 4 service auth error.
Environment: BERTH_HOME (default ~/.berth), BERTH_API_URL, BERTH_API_KEY or BERTH_API_KEY_FILE.`;

function packageVersion(): string {
  return (JSON.parse(readFileSync(packagePath('package.json'), 'utf8')) as { version: string }).version;
}

function parseNumber(kind: 'port' | 'integer' | 'positive') {
  const wants = { port: 'a port number (0 for a free one)', integer: 'a whole number', positive: 'a positive number' };
  const ok = {
    port: (n: number) => Number.isInteger(n) && n >= 0 && n <= 65535,
    integer: Number.isSafeInteger,
    positive: (n: number) => n > 0,
  };
  return (value: string): number => {
    const n = Number(value);
    if (value.trim() === '' || !ok[kind](n)) throw new InvalidArgumentError(`expected ${wants[kind]}`);
    return n;
  };
}

function buildProgram(io: Io, env: NodeJS.ProcessEnv, setExit: (code: number) => void): Command {
  const program = new Command('berth')
    .description('Gets you a running GPU instance on a GPU-rental marketplace, and never leaves one billing by mistake.')
    .version(packageVersion())
    .showHelpAfterError('(run with --help for usage)')
    .addHelpText('after', EXIT_CODES_HELP)
    // Commander quotes what the user typed in its errors: never a raw escape on the terminal.
    .configureOutput({ writeErr: (text) => process.stderr.write(safeText(text)) })
    .exitOverride();
  // Each action records its exit code; commander itself only parses.
  const run =
    <A extends unknown[]>(fn: (...args: A) => number | Promise<number>) =>
    async (...args: A) =>
      setExit(await fn(...args));

  program
    .command('daemon')
    .description('run the daemon in the foreground (pino JSON logs on stdout)')
    .option('--config <file>', 'config file overlaid on the defaults (a partial one is fine)')
    .option('--listen <host:port>', 'control API address, loopback only (default 127.0.0.1:7777)')
    .option('--pretty', 'human-readable logs')
    .option(
      '--replace-store',
      "start a new store where berth.db is missing, empty or another store's, and destroy every instance of the store it replaces",
    )
    .action(
      run(async (opts: { config?: string; listen?: string; pretty?: boolean; replaceStore?: boolean }) =>
        (await import('./commands/daemon.js')).daemonCommand(opts, env),
      ),
    );

  program
    .command('submit')
    .description('validate a job spec, submit it and print the run id')
    .argument('<file>', 'job spec file (JSON, or YAML when it ends in .yaml or .yml)')
    .option('--set <path=value>', 'override a field of the spec, e.g. --set max_price_per_hour=0.5 (repeatable)', collect, [])
    .option('--wait', 'follow the run until it is running (exit 0) or has ended (exit 1, or 4 on a service auth error)')
    .option('--json', 'print the run object as JSON')
    .option('--idempotency-key <key>', 'resubmitting with the same key returns the same run')
    .action(
      run(async (file: string, opts: { wait?: boolean; json?: boolean; idempotencyKey?: string; set: string[] }) =>
        (await import('./commands/submit.js')).submitCommand(file, opts, io, env),
      ),
    );

  program
    .command('offers')
    .description('the offers a run of this job spec would find now, relax steps included, with their billed $/h (asks the daemon)')
    .argument('<file>', 'job spec file (JSON, or YAML when it ends in .yaml or .yml)')
    .option('--set <path=value>', 'override a field of the spec, e.g. --set max_price_per_hour=0.5 (repeatable)', collect, [])
    .option('--json', 'print the report as JSON')
    .addOption(new Option('--limit <n>', 'show at most N offers (default 20; --json: all)').argParser(parseNumber('positive')))
    .action(
      run(async (file: string, opts: { set: string[]; json?: boolean; limit?: number }) =>
        (await import('./commands/offers.js')).offersCommand(file, opts, io, env),
      ),
    );

  program
    .command('status')
    .description('one run in detail, or a table of all runs')
    .argument('[run]', 'run id')
    .option('--json', 'print the run object (or an array of them) as JSON')
    .option('--watch', 'refresh live until Ctrl-C (then exit 0)')
    .action(
      run(async (runId: string | undefined, opts: { json?: boolean; watch?: boolean }) =>
        (await import('./commands/status.js')).statusCommand(runId, opts, io, env),
      ),
    );

  program
    .command('outputs')
    .description("copy a task's kept outputs (its spec's outputs) to DEST, each checked by its sha256")
    .argument('<run>', 'run id or name')
    .argument('[dest]', 'where to put them (default ./outputs-RUN)')
    .option('--attempt <n>', 'the attempt whose outputs to copy (default the last that kept any)')
    .option('--force', 'replace files already in DEST (without it, nothing is copied when any is there)')
    .option('--json', 'print what was copied as JSON')
    .action(
      run(async (runId: string, dest: string | undefined, opts: { attempt?: string; json?: boolean; force?: boolean }) =>
        (await import('./commands/outputs.js')).outputsCommand(runId, dest, opts, io, env),
      ),
    );

  program
    .command('ssh')
    .description("log in to the run's instance as root with berth's key: a shell, or one command and its exit code")
    .argument('<run>', 'run id or name')
    .argument('[command...]', 'the command to run there, after --')
    .option('--print', 'print the ssh command that does the same, and run nothing')
    .option('--config <file>', 'config file (for ssh.private_key_path)')
    .action(
      run(async (runId: string, command: string[], opts: { print?: boolean; config?: string }) =>
        (await import('./commands/ssh.js')).sshCommand(runId, command, opts, io, env),
      ),
    );

  program
    .command('ssh-config')
    .description(
      "an OpenSSH Host block for the run's instance (ssh, scp, rsync and VS Code by name); --write keeps it in BERTH_HOME/ssh/config, included from ~/.ssh/config",
    )
    .argument('<run>', 'run id or name')
    .option('--write', 'write the block and include it from ~/.ssh/config, instead of printing it')
    .option('--config <file>', 'config file (for ssh.private_key_path)')
    .action(
      run(async (runId: string, opts: { write?: boolean; config?: string }) =>
        (await import('./commands/ssh-config.js')).sshConfigCommand(runId, opts, io, env),
      ),
    );

  program
    .command('events')
    .description("the run's event log, oldest first")
    .argument('<run>', 'run id')
    .option('--json', 'print JSON (with --follow: one event per line)')
    .option('--follow', 'keep printing new events until the run has ended')
    .action(
      run(async (runId: string, opts: { json?: boolean; follow?: boolean }) =>
        (await import('./commands/events.js')).eventsCommand(runId, opts, io, env),
      ),
    );

  program
    .command('logs')
    .description("the run's container log (a task's output), scrubbed of secrets")
    .argument('<run>', 'run id')
    .option('--tail <n>', 'lines from the end (1-5000)', '200')
    .option('--follow', 'print new lines as they come (every 5 s) until the run ends')
    .action(
      run(async (runId: string, opts: { tail: string; follow?: boolean }) =>
        (await import('./commands/logs.js')).logsCommand(runId, opts, io, env),
      ),
    );

  program
    .command('cancel')
    .description('stop a run and destroy every instance it holds')
    .argument('<run>', 'run id')
    .option('--wait', 'wait until the run has ended and holds no instance')
    .option('--no-outputs', 'destroy at once, without stopping the task and taking its outputs first (a second cancel does the same)')
    .action(
      run(async (runId: string, opts: { wait?: boolean; outputs?: boolean }) =>
        (await import('./commands/cancel.js')).cancelCommand(
          runId,
          { wait: opts.wait === true, noOutputs: opts.outputs === false },
          io,
          env,
        ),
      ),
    );

  program
    .command('notifications')
    .description('outbound notification deliveries (config notify): pending, delivered, dead')
    .option('--json', 'print every delivery as JSON, newest first')
    .addOption(new Option('--state <state>', 'only deliveries in this state').choices(['pending', 'delivered', 'dead']))
    .action(
      run(async (opts: { json?: boolean; state?: string }) =>
        (await import('./commands/notifications.js')).notificationsCommand(opts, io, env),
      ),
    );

  program
    .command('resume')
    .description('let a run held after a restored backup go on (it rents again if it needs to)')
    .argument('<run>', 'run id')
    .action(run(async (runId: string) => (await import('./commands/resume.js')).resumeCommand(runId, io, env)));

  program
    .command('token')
    .description('manage the control token')
    .command('rotate')
    .description('make a new control token; the old one stops working at once')
    .action(run(async () => (await import('./commands/token.js')).tokenRotateCommand(io, env)));

  program
    .command('store')
    .description('manage the store')
    .command('migrate')
    .description('copy the SQLite store (BERTH_HOME, or --from FILE) into an empty Postgres database; stop the daemon first')
    .option('--to <url>', 'postgres://USER:PASSWORD@HOST:PORT/DATABASE (default: BERTH_STORE_URL, which keeps the password out of ps)')
    .option('--from <file>', "the SQLite file, when not BERTH_HOME's berth.db")
    .action(
      run(async (opts: { to?: string; from?: string }) => (await import('./commands/store-migrate.js')).storeMigrateCommand(opts, io, env)),
    );

  program
    .command('ui')
    .description('print (and open, where a browser is at hand) a one-time sign-in link of the web dashboard')
    .option('--no-open', 'only print the link')
    .action(run(async (opts: { open: boolean }) => (await import('./commands/ui.js')).uiCommand(opts, io, env)));

  program
    .command('doctor')
    .description('check the account: service, key, permissions, SSH key, credit (one line each; exit 0 when all pass)')
    .option('--config <file>', 'config file overlaid on the defaults, as for `berth daemon`')
    .option('--json', 'print the checks as JSON')
    .action(run(async (opts: { config?: string; json?: boolean }) => (await import('./commands/doctor.js')).doctorCommand(opts, io, env)));

  program
    .command('costs')
    .description("spend per run and per instance, beside the service's charges where the key may read billing")
    .option('--since <date>', 'from 00:00 UTC of this day (YYYY-MM-DD, or an ISO time); default: every record berth keeps')
    .option('--json', 'print the report as JSON')
    .action(run(async (opts: { since?: string; json?: boolean }) => (await import('./commands/costs.js')).costsCommand(opts, io, env)));

  program
    .command('validate')
    .description('check a job spec without submitting it (exit 0 valid, 2 invalid)')
    .argument('<file>', 'job spec file (JSON, or YAML when it ends in .yaml or .yml)')
    .option('--set <path=value>', 'override a field of the spec, e.g. --set max_price_per_hour=0.5 (repeatable)', collect, [])
    .action(
      run(async (file: string, opts: { set: string[] }) =>
        (await import('./commands/validate.js')).validateCommand(file, opts.set, io, env),
      ),
    );

  program
    .command('schema')
    .description("print the job spec's JSON Schema")
    .action(run(async () => (await import('./commands/schema.js')).schemaCommand(io)));

  program
    .command('simulate')
    .description('run the marketplace simulator; prints {"url", "api_key"} once it listens')
    .addOption(new Option('--port <n>', 'port to listen on (default: a free one)').argParser(parseNumber('port')))
    .option('--config <file>', 'simulator config JSON file')
    .addOption(new Option('--seed <n>', 'seed of the catalog and fault dice').argParser(parseNumber('integer')))
    .addOption(new Option('--time-scale <x>', 'simulated seconds per wall second').argParser(parseNumber('positive')))
    .action(
      run(async (opts: { port?: number; config?: string; seed?: number; timeScale?: number }) => {
        await (await import('./simulate.js')).simulateCommand({ ...opts, env });
        return EXIT.ok;
      }),
    );

  program
    .command('demo')
    .description('simulator + daemon + the example job, shown live until running, then cleaned up')
    .option('--task', 'the example task instead: followed to its end, which destroys its instance, and its output shown')
    .action(run(async (opts: { task?: boolean }) => (await import('./commands/demo.js')).demoCommand(io, opts)));

  return program;
}

/** Runs the CLI; resolves with the process exit code. */
export async function main(argv: string[], io: Io = processIo(), env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let code: number = EXIT.ok;
  const program = buildProgram(io, env, (c) => (code = c));
  try {
    await program.parseAsync(argv);
    return code;
  } catch (err) {
    // Commander has already printed its own usage message; --help and --version end with 0.
    if (err instanceof CommanderError) return err.exitCode === 0 ? EXIT.ok : EXIT.usage;
    reportError(io, err);
    // The operating system refused something (a port, a file): nothing was done, the user fixes it.
    return isSystemError(err) ? EXIT.usage : exitCodeFor(err);
  }
}

function reportError(io: Io, err: unknown): void {
  // A SpecFileError (./spec-file.ts) knows its file; checked by shape, so that its module (and zod) loads only when a spec is read.
  if (err instanceof SpecError && typeof (err as { file?: unknown }).file === 'string')
    specProblems((err as SpecError & { file: string }).file, err.issues).forEach((l) => io.err(l));
  else if (err instanceof BerthError) io.err(err.message);
  else if (isSystemError(err)) io.err(systemErrorSentence(err));
  else io.err(`Unexpected error (a bug in berth; please report it): ${err instanceof Error ? err.message : String(err)}`);
}

/** Commander's accumulator for a repeatable option. */
function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}
