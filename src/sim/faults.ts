// Injected transport and market faults, changeable at run time. The dice come from a PRNG seeded
// from the sim seed so a run with the same requests meets the same faults.
import { faultConfigSchema, type FaultConfig } from './config.js';
import { mulberry32, type Rng } from './prng.js';

export type TransportFault = { kind: 'drop' } | { kind: 'error'; status: 500 | 502 | 503 } | null;

export class FaultInjector {
  private config: FaultConfig;
  private readonly rng: Rng;

  constructor(seed: number, initial: FaultConfig) {
    this.config = { ...initial };
    this.rng = mulberry32(seed ^ 0xfa0175);
  }

  current(): FaultConfig {
    return { ...this.config };
  }

  /** Merges a partial update; values are validated like the config file's. */
  update(partial: { [K in keyof FaultConfig]?: FaultConfig[K] | undefined }): FaultConfig {
    this.config = faultConfigSchema.parse({ ...this.config, ...partial });
    return this.current();
  }

  latencyMs(): number {
    const { latency_ms, latency_jitter_ms } = this.config;
    return latency_ms + (latency_jitter_ms > 0 ? this.rng() * latency_jitter_ms : 0);
  }

  /** What happens to an API request before it is looked at. */
  transport(): TransportFault {
    if (this.hit(this.config.drop_rate)) return { kind: 'drop' };
    if (this.hit(this.config.error_5xx_rate)) {
      const statuses = [500, 502, 503] as const;
      return { kind: 'error', status: statuses[Math.floor(this.rng() * 3)]! };
    }
    return null;
  }

  ambiguousCreate(): boolean {
    return this.hit(this.config.ambiguous_create_rate);
  }

  offerTaken(): boolean {
    return this.hit(this.config.offer_taken_rate);
  }

  /** A stop/start/label/reboot/destroy answered 200 `{success: false}` without acting. */
  unsuccessful(): boolean {
    return this.hit(this.config.unsuccessful_200_rate);
  }

  /** The statuses a new instance shows before it loads (`boot_detour`, for `boot_detour_rate` of creates). */
  bootDetour(): FaultConfig['boot_detour'] {
    const { boot_detour, boot_detour_rate } = this.config;
    return boot_detour.length > 0 && this.hit(boot_detour_rate) ? boot_detour : [];
  }

  /** This create lost its offer to another account's create on it: what its instance shows, or null. */
  doubleBought(): FaultConfig['double_buy_sign'] | null {
    return this.hit(this.config.double_buy_rate) ? this.config.double_buy_sign : null;
  }

  /** A start that is answered as queued and leaves the instance stopped. */
  startStaysQueued(): boolean {
    return this.config.start_stays_queued;
  }

  nullInstances(): boolean {
    return this.hit(this.config.null_instances_rate);
  }

  malformedRecord(): FaultConfig['malformed_record'] {
    return this.config.malformed_record;
  }

  badKey404Everywhere(): boolean {
    return this.config.bad_key_404_everywhere;
  }

  private hit(rate: number): boolean {
    return rate > 0 && this.rng() < rate;
  }
}
