// The names of a task's outputs as the control API shows them (issue #48 item 5): a name is the
// task's own text (a file it wrote), so a file named after one of the run's secrets (its `secrets`
// values, env values under secret names: ../../job-spec/spec-secrets.ts) is shown scrubbed, as a
// log line is. The file route serves a file by the name shown, so no secret is needed to ask for
// one, and `berth outputs` writes it under that name. The API key is no secret a task knows.
import { SecretScrubber } from '../../client/scrub.js';
import { secretValues } from '../../job-spec/spec-secrets.js';
import type { OutputFile } from '../../store/index.js';

/** The run's secrets, from its stored spec (only `env` and `secrets` are read); none when unreadable. */
function secretsOf(specJson: string): string[] {
  try {
    const spec = JSON.parse(specJson) as { env?: unknown; secrets?: unknown };
    const strings = (v: unknown) =>
      typeof v === 'object' && v !== null && !Array.isArray(v)
        ? (Object.fromEntries(Object.entries(v).filter((e): e is [string, string] => typeof e[1] === 'string')) as Record<string, string>)
        : undefined;
    return secretValues({ env: strings(spec.env), secrets: strings(spec.secrets) });
  } catch {
    return [];
  }
}

/** The files as shown: name and path scrubbed of the run's secrets; everything else as kept. */
export function shownOutputFiles(specJson: string, files: OutputFile[]): OutputFile[] {
  if (files.length === 0) return files;
  const secrets = secretsOf(specJson);
  if (secrets.length === 0) return files;
  const scrubber = new SecretScrubber(secrets);
  return files.map((f) => ({ ...f, path: scrubber.scrub(f.path), name: scrubber.scrub(f.name) }));
}

/** The kept file shown under `name`: the first, when scrubbing made two names one. */
export function keptFileShownAs(specJson: string, files: OutputFile[], name: string): OutputFile | undefined {
  const shown = shownOutputFiles(specJson, files);
  const i = shown.findIndex((f) => f.name === name);
  return i === -1 ? undefined : files[i];
}
