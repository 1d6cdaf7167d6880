// Which of a spec's values are secret (issue #41 item 2). `secrets` are; `env` is configuration,
// shown as written in logs, except a variable whose name says it holds a secret (`HF_TOKEN`,
// `AWS_SECRET_ACCESS_KEY`, `DB_PASSWORD`): people put those in env out of habit, so they are treated
// as secrets too, and `berth validate` says to move them. Both are set in the instance's environment
// alike.
//
// Runs stored before `secrets` existed had every env value scrubbed: their stored spec is migrated
// with its env moved into `secrets` (./run-plan.ts), so they keep that scrubbing.

/** A name that says it holds a secret: KEY, TOKEN, SECRET, PASSWORD or CREDENTIAL anywhere in it, in any case. */
const SECRET_NAME = /KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL/i;

interface EnvFields {
  env?: Record<string, string> | undefined;
  secrets?: Record<string, string> | undefined;
}

/** The env variables whose names say they are secrets. */
function secretLookingEnv(spec: EnvFields): string[] {
  return Object.keys(spec.env ?? {}).filter((name) => SECRET_NAME.test(name));
}

/** The values no log, event or answer may show: every `secrets` value, and env values under secret names. */
export function secretValues(spec: EnvFields): string[] {
  const env = spec.env ?? {};
  return [...Object.values(spec.secrets ?? {}), ...secretLookingEnv(spec).map((name) => env[name]!)];
}

/** The instance's environment: env and secrets together (a name is in one of them only). */
export function instanceEnv(spec: EnvFields): Record<string, string> | undefined {
  if (spec.env === undefined && spec.secrets === undefined) return undefined;
  return { ...spec.env, ...spec.secrets };
}

/** `berth validate`'s warnings: env variables that should be secrets. */
export function secretEnvWarnings(spec: EnvFields): string[] {
  return secretLookingEnv(spec).map(
    (name) =>
      `env.${name}: its name says it holds a secret; it is kept out of logs as one, but move it to "secrets" (env is shown as written)`,
  );
}
