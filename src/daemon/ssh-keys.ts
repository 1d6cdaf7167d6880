// berth's SSH login key as the daemon holds it: loaded from BERTH_HOME (or ssh.private_key_path)
// when needed, so that a key fixed on disk (chmod 600) is used without a restart, and put on the
// account once at start (src/ssh/key-access.ts; docs/ssh.md). A key that cannot be used stops no
// run: berth then does what it does without SSH, and says why once.
import type { Clock } from '../clock.js';
import type { Config } from '../config/schema.js';
import { BerthError, toRunError } from '../errors.js';
import type { Logger } from '../logger.js';
import { createKeyAccess, type KeyAccess, type KeyAccessClient } from '../ssh/key-access.js';
import { loadLoginKey, type BerthKey } from '../ssh/key-pair.js';

export interface SshKeys {
  /** berth's login key, read now (made on first need); throws `ssh_key` when it cannot be used. */
  loginKey(): BerthKey;
  /** Why the key cannot be used now (the sentence with its fix), or undefined when it can. */
  unusable(): string | undefined;
  /** Where the key is put for the instances, for the key as it is now; undefined when it cannot be used. */
  access(): KeyAccess | undefined;
  /** At daemon start: makes sure the account holds the key, and says what it found. Never throws. */
  ensureOnAccount(signal: AbortSignal): Promise<void>;
}

export function makeSshKeys(deps: {
  config: Pick<Config, 'ssh'>;
  home: string;
  client: KeyAccessClient;
  clock: Clock;
  log: Logger;
}): SshKeys {
  const { config, home, client, clock, log } = deps;
  const loginKey = () => loadLoginKey({ home, privateKeyPath: config.ssh.private_key_path });
  // One KeyAccess per key: it remembers which instances were given that key.
  let held: { fingerprint: string; access: KeyAccess } | undefined;
  const access = (): KeyAccess | undefined => {
    let key: BerthKey;
    try {
      key = loginKey();
    } catch {
      return undefined;
    }
    if (held?.fingerprint !== key.fingerprint) held = { fingerprint: key.fingerprint, access: createKeyAccess({ client, key, clock }) };
    return held.access;
  };
  return {
    loginKey,
    unusable() {
      try {
        loginKey();
        return undefined;
      } catch (err) {
        return err instanceof BerthError ? err.message : `its SSH key cannot be read (${String(err)})`;
      }
    },
    access,
    async ensureOnAccount(signal) {
      let key: BerthKey;
      try {
        key = loginKey();
      } catch (err) {
        log.warn({ err: toRunError(err) }, 'berth cannot use its SSH key: it does not log in to its instances');
        return;
      }
      try {
        const found = await access()!.ensureOnAccount(signal);
        const fp = key.fingerprint;
        if (found === 'listed') log.info({ fingerprint: fp }, "berth's SSH key is on the account");
        else if (found === 'added')
          log.info({ fingerprint: fp }, "added berth's SSH key to the account: instances created from now on take it");
        else
          log.warn(
            { fingerprint: fp },
            "the API key lacks user_write, so berth's SSH key cannot be added to the account: it is attached to each instance instead",
          );
      } catch (err) {
        if (!signal.aborted)
          log.warn({ err: toRunError(err) }, "could not put berth's SSH key on the account: it is attached to each instance instead");
      }
    },
  };
}
