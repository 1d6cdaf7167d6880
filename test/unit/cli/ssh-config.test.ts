// `berth ssh-config`'s Host blocks (issue #50): the names a block answers to, and how a block is
// put into berth's own ssh config (replacing the run's earlier one and any other of the same name).
import { describe, expect, it } from 'vitest';
import { hostAliases, hostBlock, withBlock } from '../../../src/cli/commands/ssh-config.js';

const endpoint = { kind: 'direct' as const, host: '203.0.113.7', port: 41022 };

describe('berth ssh-config', () => {
  it("a block names the run by id and by name, with berth's key, root, and a known_hosts file of its own", () => {
    const block = hostBlock(
      { id: 'abc123', name: 'train' },
      endpoint,
      '/home/u/.berth/ssh/id_ed25519',
      '/home/u/.berth/ssh/known_hosts.d/7',
    );
    expect(block).toBe(
      [
        '# berth run abc123',
        'Host berth-abc123 berth-train',
        '  HostName 203.0.113.7',
        '  Port 41022',
        '  User root',
        '  IdentityFile /home/u/.berth/ssh/id_ed25519',
        '  IdentitiesOnly yes',
        '  UserKnownHostsFile /home/u/.berth/ssh/known_hosts.d/7',
        '  StrictHostKeyChecking accept-new',
        '# end berth run abc123',
        '',
      ].join('\n'),
    );
  });

  it('a path with a space is quoted; a name OpenSSH cannot take as a host name is left out', () => {
    expect(hostBlock({ id: 'r1', name: 'my run' }, endpoint, '/a b/key', '/k')).toContain('  IdentityFile "/a b/key"\n');
    expect(hostAliases({ id: 'r1', name: 'my run' })).toEqual(['berth-r1']);
  });

  it("writing a run again replaces its block; another run's block of the same name is dropped; others stay", () => {
    const a = hostBlock({ id: 'r1', name: 'train' }, endpoint, '/k', '/h1');
    const b = hostBlock({ id: 'r2', name: 'eval' }, endpoint, '/k', '/h2');
    let text = withBlock('', { id: 'r1', name: 'train' }, a);
    text = withBlock(text, { id: 'r2', name: 'eval' }, b);
    const moved = hostBlock({ id: 'r1', name: 'train' }, { ...endpoint, port: 50000 }, '/k', '/h1');
    text = withBlock(text, { id: 'r1', name: 'train' }, moved);
    expect(text.match(/^Host /gm)).toHaveLength(2);
    expect(text).toContain('  Port 50000\n');
    expect(text).not.toContain('  Port 41022\n# end berth run r1');
    // A new run named train (the first one ended): the old block of that name goes.
    const again = hostBlock({ id: 'r3', name: 'train' }, endpoint, '/k', '/h3');
    text = withBlock(text, { id: 'r3', name: 'train' }, again);
    expect(text).not.toContain('# berth run r1');
    expect(text).toContain('# berth run r2');
    expect(text).toContain('# berth run r3');
  });
});
