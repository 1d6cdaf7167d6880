// The start-up's stack of releasers (src/releasers.ts): newest first, once, every one even when one
// throws, and a start that fails gives back what it had acquired.
import { describe, expect, it } from 'vitest';
import { Releasers, withReleasers } from '../../src/releasers.js';

describe('releasers', () => {
  it('gives back newest first, awaiting a promise before the next, and only once', async () => {
    const order: string[] = [];
    const r = new Releasers();
    r.push(() => void order.push('store'));
    r.push(async () => {
      await new Promise((resolve) => setTimeout(resolve, 5));
      order.push('client');
    });
    r.push(() => void order.push('listener'));
    await Promise.all([r.release(), r.release()]);
    await r.release();
    expect(order).toEqual(['listener', 'client', 'store']);
  });

  it('runs synchronous releasers in one turn: nothing queued runs between them', async () => {
    const order: string[] = [];
    const r = new Releasers();
    r.push(() => void order.push('b'));
    r.push(() => {
      queueMicrotask(() => order.push('microtask'));
      order.push('a');
    });
    const done = r.release();
    expect(order).toEqual(['a', 'b']);
    await done;
  });

  it('runs every releaser when one throws, then throws the first error', async () => {
    const order: string[] = [];
    const r = new Releasers();
    r.push(() => void order.push('first'));
    r.push(() => {
      throw new Error('second failed');
    });
    r.push(() => {
      throw new Error('third failed');
    });
    await expect(r.release()).rejects.toThrow('third failed');
    expect(order).toEqual(['first']);
  });

  it('a failed start gives back what it acquired and throws its own error', async () => {
    const order: string[] = [];
    await expect(
      withReleasers(async (r) => {
        r.push(() => void order.push('store'));
        r.push(() => {
          throw new Error('release failed too');
        });
        r.push(() => void order.push('listener'));
        throw new Error('cannot listen');
      }),
    ).rejects.toThrow('cannot listen');
    expect(order).toEqual(['listener', 'store']);
  });

  it('a start that succeeds leaves the stack to its caller', async () => {
    const order: string[] = [];
    const r = await withReleasers(async (stack) => {
      stack.push(() => void order.push('store'));
      return stack;
    });
    expect(order).toEqual([]);
    await r.release();
    expect(order).toEqual(['store']);
  });
});
