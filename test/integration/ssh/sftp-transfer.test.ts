// The SFTP reads' pace (src/ssh/sftp-transfer.ts, issue #48) over a real login to an SSH server
// serving the simulator's SFTP server on a temp folder: the channel's window given back as the
// answers come (ssh2 alone lets it fall to half, 1 MiB, before it tops it up: at a 100 ms round
// trip that held a download to ~10 MB/s), and the READ requests leaving in batches, several to a
// socket write, not one write each.
import { randomFillSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { serveSftp } from '../../../src/sim/ssh-sftp.js';
import { loadLoginKey } from '../../../src/ssh/key-pair.js';
import { openSshSession } from '../../../src/ssh/session.js';
import { readFileRange } from '../../../src/ssh/sftp-transfer.js';
import { startSshTestServer } from '../../helpers/ssh-test-server.js';

const scratch = mkdtempSync(join(tmpdir(), 'berth-sftp-transfer-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const MiB = 1024 * 1024;

describe('readFileRange', () => {
  it('keeps the window open and sends its reads in batches; every byte arrives in order', async () => {
    const key = loadLoginKey({ home: join(scratch, 'home') });
    const root = mkdtempSync(join(scratch, 'root-'));
    const data = randomFillSync(Buffer.alloc(8 * MiB));
    writeFileSync(join(root, 'big.bin'), data);
    const server = await startSshTestServer({ authorizedKeys: [key.publicLine], sftp: (s) => serveSftp(s, root) });
    const session = await openSshSession({
      endpoints: [{ kind: 'direct', host: '127.0.0.1', port: server.port }],
      key,
      verifyHostKey: () => true,
    });
    try {
      const sftp = await session.sftp();
      // ssh2's private fields (its SFTP object is the channel; its client holds the socket).
      const own = sftp as unknown as { incoming: { window: number }; _client: { _sock: Record<string, unknown> } };
      const sock = own._client._sock as { _write: (...a: unknown[]) => unknown; _writev: (...a: unknown[]) => unknown };
      let writes = 0;
      for (const m of ['_write', '_writev'] as const) {
        const was = sock[m];
        sock[m] = (...a: unknown[]) => {
          writes++;
          return was.apply(sock, a);
        };
      }
      let reads = 0;
      const read = sftp.read.bind(sftp);
      (sftp as unknown as { read: typeof read }).read = ((...a: Parameters<typeof read>) => {
        reads++;
        return read(...a);
      }) as typeof read;
      const got: Buffer[] = [];
      let least = Infinity;
      const end = await readFileRange(
        sftp,
        'big.bin',
        { from: 0, to: data.length },
        (c) => {
          got.push(Buffer.from(c));
          least = Math.min(least, own.incoming.window);
        },
        new AbortController().signal,
      );
      expect(end).toBe(data.length);
      expect(Buffer.concat(got).equals(data)).toBe(true);
      // Given back per 1 MiB up to 4 MiB: never below 3 MiB less one answer (ssh2 alone: ~1 MiB).
      expect(least).toBeGreaterThan(2.5 * MiB);
      // ~260 reads of 31 KiB; one socket write each before; now a batch (8) a write, plus the
      // window's adjusts and the open/close.
      expect(reads).toBeGreaterThan(200);
      expect(writes).toBeLessThan(reads / 4);
      sftp.end();
    } finally {
      session.close();
      await server.close();
    }
  });
});
