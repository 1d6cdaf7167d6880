// The offer catalog: machines and the offers on them, made once from the seed. Several offers can
// share a machine (a host rents an 8-GPU box as 1, 2, 4 or 8 GPUs). Renting an offer hides it from
// search until the instance is destroyed; `taken` offers were rented "by someone else" and stay gone.
import { DEFAULT_ALLOCATED_GB, diskDph, round } from './pricing.js';
import { between, hashUnit, intBetween, mulberry32, pick, pickWeighted, type Rng } from './prng.js';

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
  /** dph_base + the disk of the search's allocated_storage (8 GB in the catalog). */
  dph_total: number;
  /** $/h of that disk. */
  storage_total_cost: number;
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
  // Documented search fields, fixed per machine (derived without the catalog's PRNG, so adding them
  // did not change any other value of a seed's catalog).
  cpu_arch: string;
  cpu_ghz: number;
  gpu_arch: string;
  gpu_frac: number;
  gpu_mem_bw: number;
  gpu_max_power: number;
  gpu_max_temp: number;
  gpu_display_active: boolean;
  bw_nvlink: number;
  pcie_bw: number;
  has_avx: number;
  datacenter: boolean;
  vms_enabled: boolean;
  mobo_name: string;
  os_version: string;
  ubuntu_version: string;
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
  /** GB/s. */
  memBw: number;
  /** Watts. */
  power: number;
}

const GPU_MODELS: GpuModel[] = [
  {
    name: 'RTX 4090',
    ramMb: 24564,
    price: [0.3, 0.7],
    dlperf: 60,
    tflops: 82.6,
    computeCap: 890,
    weight: 18,
    sizes: [1, 2, 4, 8],
    memBw: 1008,
    power: 450,
  },
  {
    name: 'RTX 3090',
    ramMb: 24576,
    price: [0.15, 0.3],
    dlperf: 33,
    tflops: 35.6,
    computeCap: 860,
    weight: 12,
    sizes: [1, 2, 4, 8],
    memBw: 936,
    power: 350,
  },
  {
    name: 'RTX A5000',
    ramMb: 24564,
    price: [0.18, 0.35],
    dlperf: 29,
    tflops: 27.8,
    computeCap: 860,
    weight: 7,
    sizes: [1, 2, 4],
    memBw: 768,
    power: 230,
  },
  {
    name: 'RTX A6000',
    ramMb: 49140,
    price: [0.4, 0.8],
    dlperf: 40,
    tflops: 38.7,
    computeCap: 860,
    weight: 7,
    sizes: [1, 2, 4, 8],
    memBw: 768,
    power: 300,
  },
  {
    name: 'Tesla T4',
    ramMb: 15360,
    price: [0.08, 0.2],
    dlperf: 9,
    tflops: 8.1,
    computeCap: 750,
    weight: 6,
    sizes: [1, 2, 4],
    memBw: 320,
    power: 70,
  },
  {
    name: 'L40S',
    ramMb: 46068,
    price: [0.7, 1.1],
    dlperf: 72,
    tflops: 91.6,
    computeCap: 890,
    weight: 7,
    sizes: [1, 2, 4, 8],
    memBw: 864,
    power: 350,
  },
  {
    name: 'A100 PCIE',
    ramMb: 40960,
    price: [0.7, 1.3],
    dlperf: 82,
    tflops: 19.5,
    computeCap: 800,
    weight: 6,
    sizes: [1, 2, 4, 8],
    memBw: 1555,
    power: 250,
  },
  {
    name: 'A100 SXM4',
    ramMb: 81920,
    price: [1.0, 1.8],
    dlperf: 105,
    tflops: 19.5,
    computeCap: 800,
    weight: 8,
    sizes: [1, 2, 4, 8],
    memBw: 2039,
    power: 400,
  },
  {
    name: 'H100 PCIE',
    ramMb: 81559,
    price: [1.8, 2.6],
    dlperf: 150,
    tflops: 51.2,
    computeCap: 900,
    weight: 6,
    sizes: [1, 2, 4, 8],
    memBw: 2039,
    power: 350,
  },
  {
    name: 'H100 SXM',
    ramMb: 81559,
    price: [2.0, 3.5],
    dlperf: 185,
    tflops: 66.9,
    computeCap: 900,
    weight: 9,
    sizes: [1, 2, 4, 8],
    memBw: 3350,
    power: 700,
  },
  {
    name: 'H100 NVL',
    ramMb: 95830,
    price: [2.2, 3.2],
    dlperf: 175,
    tflops: 60.0,
    computeCap: 900,
    weight: 4,
    sizes: [1, 2, 4, 8],
    memBw: 3938,
    power: 400,
  },
  {
    name: 'H200',
    ramMb: 143771,
    price: [3.0, 4.5],
    dlperf: 210,
    tflops: 66.9,
    computeCap: 900,
    weight: 4,
    sizes: [1, 2, 4, 8],
    memBw: 4800,
    power: 700,
  },
];

const LOCATIONS = [
  'Texas, US',
  'California, US',
  'Oregon, US',
  'Virginia, US',
  'Quebec, CA',
  'Ontario, CA',
  'Sweden, SE',
  'Norway, NO',
  'Germany, DE',
  'Netherlands, NL',
  'France, FR',
  'Poland, PL',
  'Japan, JP',
  'Taiwan, TW',
  'Singapore, SG',
  'Australia, AU',
  'Brazil, BR',
  'Finland, FI',
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
  const model = pickWeighted(
    rng,
    GPU_MODELS,
    GPU_MODELS.map((m) => m.weight),
  );
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
  const storageTotal = diskDph(DEFAULT_ALLOCATED_GB, m.storageCost);
  const dphTotal = dphBase + storageTotal;
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
    storage_total_cost: storageTotal,
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
    ...machineExtras(m, share),
  };
}

/** The documented filter fields the catalog otherwise lacks, as functions of the machine alone. */
function machineExtras(m: Machine, share: number) {
  const u = (salt: number) => hashUnit(m.id, salt);
  const datacenter = u(1) < 0.3;
  const ubuntu = u(2) < 0.5 ? '22.04' : '24.04';
  return {
    cpu_arch: 'amd64',
    cpu_ghz: round(2.4 + u(3) * 2.2, 2),
    gpu_arch: 'nvidia',
    gpu_frac: round(share, 4),
    gpu_mem_bw: m.model.memBw,
    gpu_max_power: m.model.power,
    gpu_max_temp: 83 + Math.floor(u(4) * 8),
    gpu_display_active: !datacenter && u(5) < 0.1,
    bw_nvlink: m.model.name.includes('SXM') || m.model.name === 'H200' ? 900 : 0,
    pcie_bw: round((m.pciGen >= 5 ? 52 : m.pciGen === 4 ? 25 : 12.5) * (0.9 + u(6) * 0.1), 1),
    has_avx: 1,
    datacenter,
    vms_enabled: datacenter && u(7) < 0.5,
    mobo_name: datacenter ? 'Supermicro H13DSG' : 'ASUS Pro WS WRX90E',
    os_version: ubuntu,
    ubuntu_version: ubuntu,
  };
}

/**
 * An offer as a search prices it: the compute price (on-demand `dph_base`, or `min_bid` for bid
 * offers) plus `gb` of disk, with the per-dollar fields recomputed. The catalog's own record is
 * the on-demand view at the default 8 GB.
 */
export function priced(o: SimOffer, gb: number, bid: boolean): SimOffer {
  const storage = diskDph(gb, o.storage_cost);
  const dphTotal = (bid ? o.min_bid : o.dph_base) + storage;
  return {
    ...o,
    is_bid: bid,
    dph_total: dphTotal,
    storage_total_cost: storage,
    dlperf_per_dphtotal: round(o.dlperf / dphTotal, 3),
    flops_per_dphtotal: round(o.total_flops / dphTotal, 3),
  };
}

/**
 * Offers plus who holds them. A held offer is not `rentable`; `rented` is true on every offer of a
 * machine where this account holds an instance (search_offers.yaml: "offers where the calling user
 * already has rented GPUs").
 */
export class Catalog {
  readonly offers: readonly SimOffer[];
  private readonly byId = new Map<number, SimOffer>();
  /** The bid view of each offer at the default disk, so a plain bid search copies nothing. */
  private readonly bidById = new Map<number, SimOffer>();
  /** offer id → instance id holding it, or 0 when taken by another (simulated) renter. */
  private readonly holders = new Map<number, number>();
  /** machine id → this account's instances on it. */
  private readonly ownOnMachine = new Map<number, number>();
  /** machine id → its offers. */
  private readonly byMachine = new Map<number, SimOffer[]>();

  constructor(seed: number, size: number) {
    this.offers = buildOffers(seed, size);
    for (const o of this.offers) {
      this.byId.set(o.id, o);
      this.bidById.set(o.id, priced(o, DEFAULT_ALLOCATED_GB, true));
      const list = this.byMachine.get(o.machine_id) ?? [];
      list.push(o);
      this.byMachine.set(o.machine_id, list);
    }
  }

  machineIds(): number[] {
    return [...this.byMachine.keys()];
  }

  offersOf(machineId: number): readonly SimOffer[] {
    return this.byMachine.get(machineId) ?? [];
  }

  /** The market moved an offer's minimum bid: search, records and bids see the new value. */
  setMinBid(id: number, minBid: number): void {
    const o = this.byId.get(id);
    if (!o || o.min_bid === minBid) return;
    o.min_bid = minBid;
    this.bidById.set(id, priced(o, DEFAULT_ALLOCATED_GB, true));
  }

  get(id: number): SimOffer | undefined {
    return this.byId.get(id);
  }

  bidView(id: number): SimOffer | undefined {
    return this.bidById.get(id);
  }

  isRented(id: number): boolean {
    return this.holders.has(id);
  }

  accountUsesMachine(machineId: number): boolean {
    return (this.ownOnMachine.get(machineId) ?? 0) > 0;
  }

  /** `instanceId` 0: someone else rented it; it does not come back. */
  rent(id: number, instanceId: number): void {
    this.holders.set(id, instanceId);
    const machine = this.byId.get(id)?.machine_id;
    if (instanceId !== 0 && machine !== undefined) this.ownOnMachine.set(machine, (this.ownOnMachine.get(machine) ?? 0) + 1);
  }

  release(id: number, instanceId: number): void {
    if (this.holders.get(id) !== instanceId) return;
    this.holders.delete(id);
    const machine = this.byId.get(id)?.machine_id;
    if (instanceId !== 0 && machine !== undefined) this.ownOnMachine.set(machine, (this.ownOnMachine.get(machine) ?? 1) - 1);
  }
}
