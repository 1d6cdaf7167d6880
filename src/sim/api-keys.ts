// The account's API keys. A key value is shown once (create, reset); listings never carry it.
// Create, reset and delete take effect on the next request: there is no cache and no overlap.
import { randomBytes } from 'node:crypto';
import type { Permissions } from './config.js';

export interface ApiKeyRecord {
  id: number;
  name: string;
  key: string;
  /** null: full access (billing and key management included). */
  permissions: Permissions | null;
  created_at: number;
}

export type PublicApiKey = Omit<ApiKeyRecord, 'key'> & { key_preview: string };

export function newKeyValue(): string {
  return randomBytes(32).toString('hex');
}

export class ApiKeyStore {
  private readonly byId = new Map<number, ApiKeyRecord>();
  private readonly byValue = new Map<string, ApiKeyRecord>();
  private nextId = 1;

  constructor(private readonly nowS: () => number) {}

  add(key: string, name: string, permissions: Permissions | null): ApiKeyRecord {
    const rec: ApiKeyRecord = { id: this.nextId++, name, key, permissions, created_at: this.nowS() };
    this.byId.set(rec.id, rec);
    this.byValue.set(key, rec);
    return rec;
  }

  create(name: string, permissions: Permissions | null): ApiKeyRecord {
    return this.add(newKeyValue(), name, permissions);
  }

  find(value: string): ApiKeyRecord | undefined {
    return this.byValue.get(value);
  }

  list(): PublicApiKey[] {
    return [...this.byId.values()].map(({ key, ...rest }) => ({ ...rest, key_preview: `${key.slice(0, 4)}…` }));
  }

  delete(id: number): boolean {
    const rec = this.byId.get(id);
    if (!rec) return false;
    this.byId.delete(id);
    this.byValue.delete(rec.key);
    return true;
  }

  /** A new value for the key; the old one stops working at once. */
  reset(id: number): ApiKeyRecord | undefined {
    const rec = this.byId.get(id);
    if (!rec) return undefined;
    this.byValue.delete(rec.key);
    rec.key = newKeyValue();
    this.byValue.set(rec.key, rec);
    return rec;
  }
}
