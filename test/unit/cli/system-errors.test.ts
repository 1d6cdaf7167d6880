import { describe, expect, it } from 'vitest';
import { isSystemError, systemErrorSentence } from '../../../src/cli/system-errors.js';

function sysErr(fields: Record<string, unknown>): Error {
  return Object.assign(new Error('raw'), fields);
}

describe('system errors in the CLI', () => {
  it('tells a Node system error from a bug', () => {
    expect(isSystemError(sysErr({ code: 'EADDRINUSE', syscall: 'listen' }))).toBe(true);
    expect(isSystemError(new TypeError('x is undefined'))).toBe(false);
    expect(isSystemError(sysErr({ code: 'ERR_INVALID_ARG_TYPE' }))).toBe(false);
  });

  it('says why a listen failed and what to do', () => {
    expect(systemErrorSentence(sysErr({ code: 'EACCES', syscall: 'listen', address: '127.0.0.1', port: 80 }) as never)).toBe(
      'Cannot listen on 127.0.0.1:80 because only root may use ports below 1024; pick a port from 1024 up.',
    );
    expect(systemErrorSentence(sysErr({ code: 'EADDRNOTAVAIL', syscall: 'listen', address: '10.9.9.9', port: 7777 }) as never)).toContain(
      'is not one of this machine',
    );
  });

  it('names the file and the reason', () => {
    expect(systemErrorSentence(sysErr({ code: 'ENOENT', syscall: 'open', path: '/x/job.json' }) as never)).toBe(
      'Cannot open /x/job.json: no such file or directory (ENOENT).',
    );
  });
});
