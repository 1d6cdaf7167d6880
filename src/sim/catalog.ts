// The offer catalog: machines and the offers on them, made once from the seed. Several offers can
// share a machine (a host rents an 8-GPU box as 1, 2, 4 or 8 GPUs). Renting an offer hides it from
// search until the instance is destroyed; `taken` offers were rented "by someone else" and stay gone.
import { between, intBetween, mulberry32, pick, pickWeighted, type Rng } from './prng.js';

/** An offer record with the fields of the real service (RAM in MB, bandwidth in Mb/s, money in $). */
export interface SimOffer {
  id: number;
  ask_contract_id: number;
  bundle_id: number;
  machine_id: number;
  host_id: number;
  gpu_name: string;
  num_gpus: number;
  gpu_ram: number;
  gpu_total_ram: number;
  compute_cap: number;
  cuda_max_good: number;
  driver_version: string;
  cpu_name: string;
  cpu_cores: number;
  cpu_cores_effective: number;
  cpu_ram: number;
  disk_space: number;
  disk_bw: number;
  dph_base: number;
  dph_total: number;
  min_bid: number;
  /** $ per GB-month of disk. */
  storage_cost: number;
  inet_up_cost: number;
  inet_down_cost: number;
  dlperf: number;
  dlperf_per_dphtotal: number;
  total_flops: number;
  flops_per_dphtotal: number;
  reliability: number;
  reliability2: number;
  score: number;
  inet_down: number;
  inet_up: number;
  geolocation: string;
  verification: 'verified' | 'unverified';
  verified: boolean;
  rentable: boolean;
  rented: boolean;
  external: boolean;
  direct_port_count: number;
  static_ip: boolean;
  public_ipaddr: string;
  is_bid: boolean;
  pci_gen: number;
  start_date: number;
  end_date: number;
  duration: number;
}

interface GpuModel {
  name: string;
  ramMb: number;
  /** On-demand $/h per GPU. */
  price: [number, number];
  dlperf: number;
  tflops: number;
  computeCap: number;
  /** Relative share of machines. */
  weight: number;
  /** GPUs per machine. */
  sizes: number[];
}

const GPU_MODELS: GpuModel[] = [
  { name: 'RTX 4090', ramMb: 24564, price: [0.3, 0.7], dlperf: 60, tflops: 82.6, computeCap: 890, weight: 18, sizes: [1, 2, 4, 8] },
  { name: 'RTX 3090', ramMb: 24576, price: [0.15, 0.3], dlperf: 33, tflops: 35.6, computeCap: 860, weight: 12, sizes: [1, 2, 4, 8] },
  { name: 'RTX A5000', ramMb: 24564, price: [0.18, 0.35], dlperf: 29, tflops: 27.8, computeCap: 860, weight: 7, sizes: [1, 2, 4] },
  { name: 'RTX A6000', ramMb: 49140, price: [0.4, 0.8], dlperf: 40, tflops: 38.7, computeCap: 860, weight: 7, sizes: [1, 2, 4, 8] },
  { name: 'Tesla T4', ramMb: 15360, price: [0.08, 0.2], dlperf: 9, tflops: 8.1, computeCap: 750, weight: 6, sizes: [1, 2, 4] },
  { name: 'L40S', ramMb: 46068, price: [0.7, 1.1], dlperf: 72, tflops: 91.6, computeCap: 890, weight: 7, sizes: [1, 2, 4, 8] },
  { name: 'A100 PCIE', ramMb: 40960, price: [0.7, 1.3], dlperf: 82, tflops: 19.5, computeCap: 800, weight: 6, sizes: [1, 2, 4, 8] },
  { name: 'A100 SXM4', ramMb: 81920, price: [1.0, 1.8], dlperf: 105, tflops: 19.5, computeCap: 800, weight: 8, sizes: [1, 2, 4, 8] },
  { name: 'H100 PCIE', ramMb: 81559, price: [1.8, 2.6], dlperf: 150, tflops: 51.2, computeCap: 900, weight: 6, sizes: [1, 2, 4, 8] },
  { name: 'H100 SXM', ramMb: 81559, price: [2.0, 3.5], dlperf: 185, tflops: 66.9, computeCap: 900, weight: 9, sizes: [1, 2, 4, 8] },
  { name: 'H100 NVL', ramMb: 95830, price: [2.2, 3.2], dlperf: 175, tflops: 60.0, computeCap: 900, weight: 4, sizes: [1, 2, 4, 8] },
  { name: 'H200', ramMb: 143771, price: [3.0, 4.5], dlperf: 210, tflops: 66.9, computeCap: 900, weight: 4, sizes: [1, 2, 4, 8] },
];

const LOCATIONS = [
  'Texas, US', 'California, US', 'Oregon, US', 'Virginia, US', 'Quebec, CA', 'Ontario, CA', 'Sweden, SE',
  'Norway, NO', 'Germany, DE', 'Netherlands, NL', 'France, FR', 'Poland, PL', 'Japan, JP', 'Taiwan, TW',
  'Singapore, SG', 'Australia, AU', 'Brazil, BR', 'Finland, FI',
];
const CPUS: Array<[string, number]> = [
  ['AMD EPYC 7543 32-Core Processor', 64],
  ['AMD EPYC 9654 96-Core Processor', 192],
  ['AMD Ryzen 9 7950X 16-Core Processor', 32],
  ['Intel Xeon Platinum 8480+', 112],
  ['Intel Core i9-13900K', 32],
  ['AMD EPYC 7B13 64-Core Processor', 128],
];
const DRIVERS = ['535.183.01', '545.29.06', '550.90.07', '555.42.02', '560.35.03'];

const round = (x: number, digits: number) => Math.round(x * 10 ** digits) / 10 ** digits;

export function gpuNames(): string[] {
  return GPU_MODELS.map((m) => m.name);
}

/** Builds the offers of one seed; same seed and size → same catalog. */
export function buildOffers(seed: number, size: number): SimOffer[] {
  const rng = mulberry32(seed ^ 0x5eed0ff3);
  const offers: SimOffer[] = [];
  let nextOfferId = 3_100_000 + intBetween(rng, 0, 99_999);
  let machineId = 10_000 + intBetween(rng, 0, 999);
  const epoch = 1_735_689_600; // 2025-01-01: fixed so the catalog does not depend on the wall clock
  while (offers.length < size) {
    machineId += intBetween(rng, 1, 40);
    const machine = makeMachine(rng, machineId);
    for (const n of machine.model.sizes.filter((s) => s <= machine.gpus)) {
      if (offers.length >= size) break;
      // Not every split is listed; the whole machine always is.
      if (n !== machine.gpus && rng() < 0.4) continue;
      nextOfferId += intBetween(rng, 1, 997);
      offers.push(makeOffer(rng, machine, n, nextOfferId, epoch));
    }
  }
  return offers;
}

interface Machine {
  id: number;
  hostId: number;
  model: GpuModel;
  gpus: number;
  pricePerGpu: number;
  location: string;
  cpu: [string, number];
  cpuRamMb: number;
  diskGb: number;
  verified: boolean;
  directPorts: number;
  ip: string;
  reliability: number;
  inetDown: number;
  inetUp: number;
  storageCost: number;
  driver: string;
  pciGen: number;
}

function makeMachine(rng: Rng, id: number): Machine {
  const model = pickWeighted(rng, GPU_MODELS, GPU_MODELS.map((m) => m.weight));
  const gpus = pick(rng, model.sizes);
  const cpu = pick(rng, CPUS);
  return {
    id,
    hostId: 100_000 + Math.floor(id / 7) * 3 + intBetween(rng, 0, 2),
    model,
    gpus,
    pricePerGpu: between(rng, model.price[0], model.price[1]),
    location: pick(rng, LOCATIONS),
    cpu,
    cpuRamMb: gpus * pick(rng, [32, 64, 128]) * 1024,
    diskGb: gpus * pick(rng, [250, 500, 1000]),
    verified: rng() < 0.8,
    directPorts: rng() < 0.12 ? 0 : pick(rng, [8, 16, 64, 128, 499]),
    // 198.51.100.0/24 and 203.0.113.0/24 are documentation ranges: never someone's real host.
    ip: `${pick(rng, ['198.51.100', '203.0.113'])}.${intBetween(rng, 1, 254)}`,
    reliability: between(rng, 0.9, 0.9995),
    inetDown: intBetween(rng, 200, 9000),
    inetUp: intBetween(rng, 100, 8000),
    storageCost: round(between(rng, 0.05, 0.25), 3),
    driver: pick(rng, DRIVERS),
    pciGen: pick(rng, [3, 4, 4, 5]),
  };
}

function makeOffer(rng: Rng, m: Machine, n: number, id: number, epoch: number): SimOffer {
  const share = n / m.gpus;
  // Smaller slices of a machine cost slightly more per GPU, as on the real market.
  const dphBase = round(m.pricePerGpu * n * (1 + (1 - share) * 0.05), 4);
  const storageForDefaultDisk = (m.storageCost * 5) / 720; // the official CLI asks with allocated_storage 5 GB
  const dphTotal = round(dphBase + storageForDefaultDisk, 4);
  const dlperf = round(m.model.dlperf * n * between(rng, 0.92, 1.05), 3);
  const totalFlops = round(m.model.tflops * n, 2);
  const start = epoch - intBetween(rng, 86_400, 200 * 86_400);
  const end = epoch + intBetween(rng, 30 * 86_400, 365 * 86_400);
  const reliability = round(m.reliability, 4);
  return {
    id,
    ask_contract_id: id,
    bundle_id: id,
    machine_id: m.id,
    host_id: m.hostId,
    gpu_name: m.model.name,
    num_gpus: n,
    gpu_ram: m.model.ramMb,
    gpu_total_ram: m.model.ramMb * n,
    compute_cap: m.model.computeCap,
    cuda_max_good: m.model.computeCap >= 890 ? 12.6 : 12.4,
    driver_version: m.driver,
    cpu_name: m.cpu[0],
    cpu_cores: m.cpu[1],
    cpu_cores_effective: round(m.cpu[1] * share, 1),
    cpu_ram: Math.round(m.cpuRamMb * share),
    disk_space: round(m.diskGb * share, 1),
    disk_bw: intBetween(rng, 800, 6000),
    dph_base: dphBase,
    dph_total: dphTotal,
    min_bid: round(dphBase * between(rng, 0.35, 0.6), 4),
    storage_cost: m.storageCost,
    inet_up_cost: round(between(rng, 0.002, 0.02), 4),
    inet_down_cost: round(between(rng, 0.002, 0.02), 4),
    dlperf,
    dlperf_per_dphtotal: round(dlperf / dphTotal, 3),
    total_flops: totalFlops,
    flops_per_dphtotal: round(totalFlops / dphTotal, 3),
    reliability,
    reliability2: reliability,
    // The service's score weighs value for money by reliability; the exact formula is not public.
    score: round((dlperf / dphTotal) * reliability ** 4 * (m.verified ? 1 : 0.8), 3),
    inet_down: m.inetDown,
    inet_up: m.inetUp,
    geolocation: m.location,
    verification: m.verified ? 'verified' : 'unverified',
    verified: m.verified,
    rentable: true,
    rented: false,
    external: false,
    direct_port_count: m.directPorts,
    static_ip: m.directPorts > 0 && rng() < 0.6,
    public_ipaddr: m.ip,
    is_bid: false,
    pci_gen: m.pciGen,
    start_date: start,
    end_date: end,
    duration: end - epoch,
  };
}

/** The bid (interruptible) view of an offer: priced at its minimum bid. */
export function bidView(o: SimOffer): SimOffer {
  const dphTotal = round(o.min_bid + (o.dph_total - o.dph_base), 4);
  return {
    ...o,
    is_bid: true,
    dph_total: dphTotal,
    dlperf_per_dphtotal: round(o.dlperf / dphTotal, 3),
    flops_per_dphtotal: round(o.total_flops / dphTotal, 3),
  };
}

/** Offers plus who holds them. Rented offers are hidden from search. */
export class Catalog {
  readonly offers: readonly SimOffer[];
  readonly bidOffers: readonly SimOffer[];
  private readonly byId = new Map<number, SimOffer>();
  /** offer id → instance id holding it, or 0 when taken by another (simulated) renter. */
  private readonly holders = new Map<number, number>();

  constructor(seed: number, size: number) {
    this.offers = buildOffers(seed, size);
    this.bidOffers = this.offers.map(bidView);
    for (const o of this.offers) this.byId.set(o.id, o);
  }

  get(id: number): SimOffer | undefined {
    return this.byId.get(id);
  }

  isRented(id: number): boolean {
    return this.holders.has(id);
  }

  /** `instanceId` 0: someone else rented it; it does not come back. */
  rent(id: number, instanceId: number): void {
    this.holders.set(id, instanceId);
  }

  release(id: number, instanceId: number): void {
    if (this.holders.get(id) === instanceId) this.holders.delete(id);
  }
}
