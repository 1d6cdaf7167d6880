// Simulator settings shared by the tests and the benchmarks (which are compiled without test/).
import type { SimConfigInput } from './config.js';

/**
 * 100× time, short boots, real SSH banners on loopback (berth's runs are ready only once SSH
 * answers, as with ready_when "ssh"), the admin routes on, and no rate limits unless asked.
 */
export const FAST_SIM: SimConfigInput = {
  admin: true,
  time_scale: 100,
  tick_ms: 10,
  lifecycle: { provision_s: 5, boot_s: { min: 20, max: 40 }, fail_after_s: 20, lost_after_s: { min: 100, max: 200 } },
  rate_limits: { enabled: false },
  ssh_listeners: { enabled: true },
};
