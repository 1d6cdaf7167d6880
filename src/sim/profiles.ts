// Which fault profile an instance gets, and which create-time fault an offer has. A machine's profile is drawn from the seed and the
// configured rates, fixed per machine (a bad host stays bad); tests can force a profile per
// machine or per offer, and an offer's forced profile wins. The profile is read when an instance is
// created, so forcing one changes later creates, not instances already made.
import { FAULT_PROFILES, type FaultProfile, type OfferFault, type SimConfig } from './config.js';
import { hashUnit } from './prng.js';

export class ProfileBook {
  private readonly byMachine = new Map<number, FaultProfile>();
  private readonly byOffer = new Map<number, FaultProfile>();
  private readonly offerFaults = new Map<number, OfferFault>();

  constructor(
    private readonly seed: number,
    private readonly rates: SimConfig['profile_rates'],
    forcedMachines: Record<string, FaultProfile>,
    forcedOffers: Record<string, FaultProfile>,
    offerFaults: Record<string, OfferFault>,
  ) {
    for (const [id, p] of Object.entries(forcedMachines)) this.byMachine.set(Number(id), p);
    for (const [id, p] of Object.entries(forcedOffers)) this.byOffer.set(Number(id), p);
    for (const [id, f] of Object.entries(offerFaults)) this.offerFaults.set(Number(id), f);
  }

  /** null clears the offer's fault. */
  setOfferFault(offerId: number, fault: OfferFault | null): void {
    if (fault === null) this.offerFaults.delete(offerId);
    else this.offerFaults.set(offerId, fault);
  }

  offerFault(offerId: number): OfferFault | undefined {
    return this.offerFaults.get(offerId);
  }

  setMachine(machineId: number, profile: FaultProfile): void {
    this.byMachine.set(machineId, profile);
  }

  setOffer(offerId: number, profile: FaultProfile): void {
    this.byOffer.set(offerId, profile);
  }

  profileFor(offerId: number, machineId: number): FaultProfile {
    return this.byOffer.get(offerId) ?? this.byMachine.get(machineId) ?? this.drawn(machineId);
  }

  private drawn(machineId: number): FaultProfile {
    let x = hashUnit(this.seed, machineId, 0x0fa17);
    for (const p of FAULT_PROFILES) {
      if (p === 'healthy') continue;
      x -= this.rates[p];
      if (x < 0) return p;
    }
    return 'healthy';
  }
}
