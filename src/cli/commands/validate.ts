// `berth validate FILE`: the daemon's own validation, without a daemon, and the GPU names checked
// against the service's list (../gpu-name-list.ts). Problems throw SpecFileError (exit 2).
import type { Io } from '../io.js';
import { EXIT } from '../exit-codes.js';
import { checkGpuNames } from '../gpu-name-list.js';
import { readSpecFile } from '../spec-file.js';

export async function validateCommand(file: string, overrides: readonly string[], io: Io, env: NodeJS.ProcessEnv): Promise<number> {
  await checkGpuNames(file, readSpecFile(file, overrides), io, env);
  io.out(`${file} is a valid job spec.`);
  return EXIT.ok;
}
