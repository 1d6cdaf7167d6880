// Which public keys may log in to each instance, and each instance's host key.
//
// Authorized keys: the account's keys as they were when the instance was created, plus the keys
// attached to that instance. The service's docs say so: "Adding a key to your account keys only
// applies to new instances. Existing instances will not get the new key automatically. To add a
// key, use the instance-specific SSH interface" (vast-ai/docs guides/instances/connect/ssh.mdx,
// the Warning after "Generate a new SSH key pair", and again under "SSH Key Changes"). A key
// deleted from the account later stays in the instances made before: the same rule read the other
// way (the container's authorized_keys is written once). Attached keys are listed with ids
// (show_instance_ssh_keys.yaml: `[{"id", "name", "public_key"}]`) and detached by id
// (detach_ssh.yaml: "Numeric ID of the SSH key"); an account key keeps its account id here, an
// attached key that is not on the account gets one of its own.
//
// Host keys: one ed25519 key per instance, made at its first open and kept across its stops and
// starts (a container's sshd keeps its /etc/ssh keys while the container lives); the host-key fault
// replaces it at the next open, as a recreated container would.
import { createHash, timingSafeEqual } from 'node:crypto';
import ssh2 from 'ssh2';
import type { SshKeyRecord } from './account.js';

const { utils } = ssh2;

export interface InstanceKey {
  id: number;
  name: string;
  public_key: string;
}

interface Entry {
  keys: InstanceKey[];
  hostKey: string | null;
  /** The host-key fault: a new host key at the next open. */
  newHostKey: boolean;
  /** The refused-key fault: every key is refused, as if authorized_keys were lost. */
  refuseAll: boolean;
}

/** Ids of attached keys that are not account keys: far above any account key's id. */
const ATTACHED_ID_BASE = 1_000_000;

export class InstanceSshKeys {
  private readonly entries = new Map<number, Entry>();
  private nextAttachedId = ATTACHED_ID_BASE;

  /** The instance is created: it takes the account's keys as they are now. */
  created(instanceId: number, accountKeys: readonly SshKeyRecord[]): void {
    const keys = accountKeys.map((k) => ({ id: k.id, name: '', public_key: k.public_key }));
    this.entries.set(instanceId, { keys, hostKey: null, newHostKey: false, refuseAll: false });
  }

  list(instanceId: number): InstanceKey[] {
    return [...(this.entry(instanceId)?.keys ?? [])];
  }

  /** Adds a key to the instance (the account's id when it is an account key); an authorized key is kept once. */
  attach(instanceId: number, publicKey: string, accountKeys: readonly SshKeyRecord[]): InstanceKey {
    const e = this.entryOrNew(instanceId);
    const blob = keyBlob(publicKey);
    const same = e.keys.find((k) => blob !== null && sameBlob(keyBlob(k.public_key), blob));
    if (same) return same;
    const onAccount = accountKeys.find((k) => blob !== null && sameBlob(keyBlob(k.public_key), blob));
    const key = { id: onAccount?.id ?? this.nextAttachedId++, name: '', public_key: publicKey };
    e.keys.push(key);
    return key;
  }

  /** Removes the key with that id from the instance; false when it has none by that id. */
  detach(instanceId: number, keyId: number): boolean {
    const e = this.entry(instanceId);
    const i = e?.keys.findIndex((k) => k.id === keyId) ?? -1;
    if (!e || i < 0) return false;
    e.keys.splice(i, 1);
    return true;
  }

  /** Whether a client's public key (its wire blob) may log in to the instance now. */
  authorizes(instanceId: number, blob: Buffer): boolean {
    const e = this.entry(instanceId);
    if (!e || e.refuseAll) return false;
    return e.keys.some((k) => sameBlob(keyBlob(k.public_key), blob));
  }

  /** The key with that blob among the instance's, parsed (to verify a signature); null when not authorized. */
  parsedKey(instanceId: number, blob: Buffer): ssh2.ParsedKey | null {
    if (!this.authorizes(instanceId, blob)) return null;
    for (const k of this.entry(instanceId)!.keys) {
      const parsed = utils.parseKey(k.public_key);
      if (!(parsed instanceof Error) && sameBlob(parsed.getPublicSSH(), blob)) return parsed;
    }
    return null;
  }

  /** The refused-key fault on (every key refused) or off. */
  refuseAll(instanceId: number, on: boolean): void {
    this.entryOrNew(instanceId).refuseAll = on;
  }

  /** The host-key fault: the instance's sshd has a new host key from its next open on. */
  changeHostKey(instanceId: number): void {
    this.entryOrNew(instanceId).newHostKey = true;
  }

  /** The private host key the instance's sshd opens with: made at the first open, or anew after the fault. */
  hostKeyForOpen(instanceId: number): string {
    const e = this.entryOrNew(instanceId);
    if (e.hostKey === null || e.newHostKey) {
      e.hostKey = ed25519KeyPair().private;
      e.newHostKey = false;
    }
    return e.hostKey;
  }

  /** The instance is destroyed: its keys go with its container. */
  forget(instanceId: number): void {
    this.entries.delete(instanceId);
  }

  private entry(instanceId: number): Entry | undefined {
    return this.entries.get(instanceId);
  }

  /** Instances made outside the create route (the admin bulk fill) have no keys until one is attached. */
  private entryOrNew(instanceId: number): Entry {
    let e = this.entries.get(instanceId);
    if (!e) this.entries.set(instanceId, (e = { keys: [], hostKey: null, newHostKey: false, refuseAll: false }));
    return e;
  }
}

/**
 * A new ed25519 key pair (OpenSSH format) that ssh2 itself can read: about 1 in 256 pairs from
 * ssh2 1.17's `generateKeyPairSync('ed25519')` do not parse (a public key whose first byte is 0
 * loses it: mscdex/ssh2 issues #1390, #1513), so such a pair is made again.
 */
export function ed25519KeyPair(): { private: string; public: string } {
  for (;;) {
    const pair = utils.generateKeyPairSync('ed25519');
    if (!(utils.parseKey(pair.private) instanceof Error) && !(utils.parseKey(pair.public) instanceof Error)) return pair;
  }
}

/** The wire blob of an OpenSSH public key line; null when it does not parse. */
function keyBlob(publicKey: string): Buffer | null {
  const parsed = utils.parseKey(publicKey);
  return parsed instanceof Error ? null : parsed.getPublicSSH();
}

function sameBlob(a: Buffer | null, b: Buffer): boolean {
  return a !== null && a.length === b.length && timingSafeEqual(a, b);
}

/** OpenSSH's fingerprint of a key blob: `SHA256:` and the unpadded base64 of its SHA-256. */
export function fingerprint(blob: Buffer): string {
  return `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
}
