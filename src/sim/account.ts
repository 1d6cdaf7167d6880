// The account's own small resources: secrets (env variables, shown masked only) and SSH public keys.
// The user record itself is assembled by the routes from config and the ledger.

export interface SshKeyRecord {
  id: number;
  user_id: number;
  public_key: string;
  /** ISO 8601, as show_ssh_keys.yaml's `date-time`. */
  created_at: string;
  deleted_at: null;
}

/** show_env_vars.yaml's masked value. */
const MASK = '*****';

export class SecretStore {
  private readonly values = new Map<string, string>();

  masked(): Record<string, string> {
    return Object.fromEntries([...this.values.keys()].map((k) => [k, MASK]));
  }

  has(key: string): boolean {
    return this.values.has(key);
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
    private readonly nowMs: () => number,
  ) {}

  list(): SshKeyRecord[] {
    return [...this.keys.values()];
  }

  add(publicKey: string): SshKeyRecord {
    const rec: SshKeyRecord = {
      id: this.nextId++,
      user_id: this.userId,
      public_key: publicKey,
      created_at: new Date(this.nowMs()).toISOString(),
      deleted_at: null,
    };
    this.keys.set(rec.id, rec);
    return rec;
  }

  update(id: number, publicKey: string): SshKeyRecord | undefined {
    const rec = this.keys.get(id);
    if (rec) rec.public_key = publicKey;
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
