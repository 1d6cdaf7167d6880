// `berth validate FILE`: the daemon's own validation, without a daemon, and the GPU names checked
// against the service's list (../gpu-name-list.ts). Problems throw SpecFileError (exit 2); warnings
// (an env variable whose name says it is a secret, GPU names not checked, a GPU memory bound in MB
// that leaves out the cards of the size it names) go to stderr, exit 0.
import type { Io } from '../io.js';
import { EXIT } from '../exit-codes.js';
import { checkGpuNames } from '../gpu-name-list.js';
import { readSpecFile } from '../spec-file.js';
import { gpuMemorySpecWarnings } from '../../job-spec/gpu-memory.js';
import { secretEnvWarnings } from '../../job-spec/spec-secrets.js';
import { parseJobSpec } from '../../job-spec/validate.js';

export async function validateCommand(file: string, overrides: readonly string[], io: Io, env: NodeJS.ProcessEnv): Promise<number> {
  const raw = readSpecFile(file, overrides);
  await checkGpuNames(file, raw, io, env);
  const spec = parseJobSpec(raw);
  for (const warning of [...secretEnvWarnings(spec), ...gpuMemorySpecWarnings(spec)]) io.err(`warning: ${warning}`);
  io.out(`${file} is a valid job spec.`);
  return EXIT.ok;
}
