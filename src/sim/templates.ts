// Templates: saved launch settings with a numeric `id` and a separate `hash_id`. Deletion takes the
// numeric id only, as on the service (a hash_id there is a 400, so clients learn the quirk).
import { createHash } from 'node:crypto';

export interface TemplateRecord {
  id: number;
  hash_id: string;
  name: string;
  image: string;
  tag: string;
  env: string;
  onstart: string;
  runtype: string;
  ssh_direct: boolean;
  jup_direct: boolean;
  use_ssh: boolean;
  private: boolean;
  recommended_disk_space: number;
  created_at: number;
}

export type TemplateFields = Partial<Omit<TemplateRecord, 'id' | 'hash_id' | 'created_at'>>;

export class TemplateStore {
  private readonly byId = new Map<number, TemplateRecord>();
  private nextId = 100_001;

  constructor(private readonly nowS: () => number) {}

  list(): TemplateRecord[] {
    return [...this.byId.values()];
  }

  get(id: number): TemplateRecord | undefined {
    return this.byId.get(id);
  }

  findByHash(hashId: string): TemplateRecord | undefined {
    return [...this.byId.values()].find((t) => t.hash_id === hashId);
  }

  create(fields: TemplateFields & { name: string; image: string }): TemplateRecord {
    const id = this.nextId++;
    const rec: TemplateRecord = {
      tag: 'latest',
      env: '',
      onstart: '',
      runtype: 'ssh',
      ssh_direct: true,
      jup_direct: false,
      use_ssh: true,
      private: true,
      recommended_disk_space: 10,
      ...fields,
      id,
      hash_id: createHash('md5').update(`template:${id}:${fields.name}`).digest('hex'),
      created_at: this.nowS(),
    };
    this.byId.set(id, rec);
    return rec;
  }

  /** Updates in place; the service keeps the hash stable across edits in this simulator. */
  update(rec: TemplateRecord, fields: TemplateFields): TemplateRecord {
    Object.assign(rec, fields);
    return rec;
  }

  delete(id: number): boolean {
    return this.byId.delete(id);
  }
}
