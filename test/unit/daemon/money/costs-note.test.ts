// `berth costs`'s sentence about the service's charges matches the figures it stands under.
import { describe, expect, it } from 'vitest';
import { serviceNote } from '../../../../src/daemon/money/costs.js';

describe("the costs report's note", () => {
  it("says berth's figure is the higher when it is (the service's rounding to 3 decimals allowed for)", () => {
    expect(serviceNote(0.058, 0.041, 2)).toMatch(/so its figure is the higher$/);
    expect(serviceNote(0.0014, 0.0018, 1)).toMatch(/so its figure is the higher$/);
  });

  it('never says so under a service total above it', () => {
    const note = serviceNote(0.058, 1.58, 2);
    expect(note).not.toMatch(/so its figure is the higher/);
    expect(note).toMatch(/they are above berth's figure/);
  });
});
