// The account's own small resources: secrets (env variables, shown masked only) and SSH public keys.
// The user record itself is assembled by the routes from config and the ledger.

export interface SshKeyRecord {
  id: number;
  user_id: number;
  public_key: string;
  created_at: number;
}

const MASK = '********';

export class SecretStore {
  private readonly values = new Map<string, string>();

  masked(): Record<string, string> {
    return Object.fromEntries([...this.values.keys()].map((k) => [k, MASK]));
  }

  set(key: string, value: string): void {
    this.values.set(key, value);
  }

  delete(key: string): boolean {
    return this.values.delete(key);
  }
}

export class SshKeyStore {
  private readonly keys = new Map<number, SshKeyRecord>();
  private nextId = 1;

  constructor(
    private readonly userId: number,
    private readonly nowS: () => number,
  ) {}

  list(): SshKeyRecord[] {
    return [...this.keys.values()];
  }

  add(publicKey: string): SshKeyRecord {
    const rec = { id: this.nextId++, user_id: this.userId, public_key: publicKey, created_at: this.nowS() };
    this.keys.set(rec.id, rec);
    return rec;
  }

  delete(id: number): boolean {
    return this.keys.delete(id);
  }

  /** The user record's `ssh_key`: the newest registered key. */
  latest(): string {
    return [...this.keys.values()].at(-1)?.public_key ?? '';
  }
}
