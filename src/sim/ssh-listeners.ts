// Opt-in SSH endpoints that a client can really connect to (`ssh_listeners.enabled`).
//
// Each instance gets two loopback port numbers at create time (`reserve`): its SSH proxy port and
// its direct port. The record shows them from then on, with 127.0.0.1 as `ssh_host` and
// `public_ipaddr`. A port listens only while the instance is `running`:
//   open   — the instance entered running: listen on its ports (if a port was taken meanwhile, on a
//            new one, and the record follows, as ports change across restarts on the service);
//   closed — it left running (stop, outbid, reboot, exit, loss) or was destroyed: stop listening and
//            drop open connections. Connections are then refused.
// What a connection gets depends on the instance's profile: a real SSH server (ssh-server.ts: the
// banner at once, then key exchange, public-key login as root, exec, shell and SFTP in the
// instance's directory; healthy and the lifecycle profiles), nothing ever listening
// (`ssh_refused`), a close without a byte (`ssh_no_banner`), silence until the hold ends
// (`ssh_hang`), or closes without a banner until `late_s` sim seconds after running, then the
// server (`ssh_late`: a port forward whose sshd is not up yet), or the server at once but every key
// refused until `late_s` (`ssh_keys_late`: sshd up before the container's keys). A connection held silently, or not
// logged in, is closed after `hold_ms` wall ms, like sshd's login grace time. The instance's host
// key and authorized keys are in ssh-keys.ts; a restart of its sshd (the host-key fault) closes and
// opens its listeners on the same ports.
// In SSH launch mode sshd runs in the container beside onstart, so each connection it answered adds
// its lines to the container log as they happen (onstart's output reaches that log "interleaved
// with sshd's connection lines": service-facts.md, "Added 2026-11-27"); `sshdLines` gives them.
import { createServer, type Server, type Socket } from 'node:net';
import type { SimClock } from './clock.js';
import type { SimConfig } from './config.js';
import type { Line } from './container-logs.js';
import { wantsDirect } from './instance-record.js';
import type { LiveInstance, SshPorts } from './instances.js';
import type { InstanceSshKeys } from './ssh-keys.js';
import { Sshd } from './ssh-server.js';

/** What the instances' sshd needs from the rest of the world. */
export interface SshWorld {
  keys: InstanceSshKeys;
  /** The instance's directory and the environment its processes get (onstart-runner.ts). */
  container(inst: LiveInstance): { dir: string; env: NodeJS.ProcessEnv };
  /** The SSH faults in force now (config `faults`, changeable at run time). */
  faults(): { refuseKeys: boolean; dropAfterMs: number | null };
}

const HOST = '127.0.0.1';

/** The ports an instance's record shows; mutable because a rebind may move them. */

interface Entry {
  closed: boolean;
  servers: Set<Server>;
  sockets: Set<Socket>;
  /** The container's sshd while it runs. */
  sshd: Sshd;
  /** Resolve once each server of the entry has stopped (or never bound). */
  done: Promise<void>[];
}

/** sshd's lines kept per instance: the last ones. */
const SSHD_LINES_KEPT = 2_000;

export class SshListeners {
  private readonly entries = new Map<number, Entry>();
  private readonly logs = new Map<number, Line[]>();

  constructor(
    private readonly cfg: SimConfig['ssh_listeners'],
    private readonly clock: SimClock,
    private readonly world: SshWorld,
  ) {}

  get enabled(): boolean {
    return this.cfg.enabled;
  }

  /** Two free loopback port numbers, found by binding to port 0 and letting go. */
  async reserve(): Promise<SshPorts> {
    const [proxyPort, directPort] = await Promise.all([freePort(), freePort()]);
    return { proxyPort, directPort };
  }

  /** The instance entered running: listen on its ports, per its profile. */
  open(inst: LiveInstance): void {
    const ports = inst.sshPorts;
    if (!ports || inst.hist.profile === 'ssh_refused') return;
    const id = inst.hist.id;
    this.close(id);
    const runningSince = inst.hist.statuses.at(-1)?.at.sim_s ?? this.clock.simS();
    const sshd = new Sshd({
      instanceId: id,
      hostKey: this.world.keys.hostKeyForOpen(id),
      ident: this.cfg.banner.slice('SSH-2.0-'.length),
      keys: this.world.keys,
      container: () => this.world.container(inst),
      loginGraceMs: this.cfg.hold_ms,
      faults: () => this.world.faults(),
      keysReady: () => inst.hist.profile !== 'ssh_keys_late' || this.clock.simS() >= runningSince + this.cfg.late_s,
      log: (line) => {
        if (/\bssh/.test(inst.params.runtype)) this.addLine(id, line);
      },
      simS: () => this.clock.simS(),
    });
    const entry: Entry = { closed: false, servers: new Set(), sockets: new Set(), sshd, done: [] };
    this.entries.set(inst.hist.id, entry);
    this.listen(entry, inst, runningSince, 'proxyPort', ports.proxyPort);
    if (hasDirect(inst)) this.listen(entry, inst, runningSince, 'directPort', ports.directPort);
  }

  /** The instance left running or is gone: stop listening and drop its connections. */
  close(instanceId: number): void {
    const entry = this.entries.get(instanceId);
    if (!entry) return;
    this.entries.delete(instanceId);
    entry.closed = true;
    for (const server of entry.servers) if (server.listening) server.close();
    for (const socket of entry.sockets) socket.destroy();
    entry.done.push(entry.sshd.close());
  }

  /** The dropped-session fault: the instance's open SSH connections are cut now (it goes on listening). */
  dropSessions(instanceId: number): boolean {
    const entry = this.entries.get(instanceId);
    entry?.sshd.dropAll();
    return entry !== undefined;
  }

  /** The host-key fault: a new host key from the instance's next open; a running sshd restarts with it now. */
  changeHostKey(inst: LiveInstance): void {
    this.world.keys.changeHostKey(inst.hist.id);
    if (this.entries.has(inst.hist.id)) this.open(inst);
  }

  /** sshd's lines in the container log of an instance, each at its sim moment. */
  sshdLines(instanceId: number): readonly Line[] {
    return this.logs.get(instanceId) ?? [];
  }

  /** The instance is destroyed: its container, and the log with it, are gone. */
  forget(instanceId: number): void {
    this.close(instanceId);
    this.logs.delete(instanceId);
    this.world.keys.forget(instanceId);
  }

  async closeAll(): Promise<void> {
    const all = [...this.entries.keys()].map((id) => this.entries.get(id)!);
    for (const id of [...this.entries.keys()]) this.close(id);
    await Promise.all(all.flatMap((e) => e.done));
  }

  private listen(entry: Entry, inst: LiveInstance, runningSince: number, which: keyof SshPorts, port: number): void {
    const server = createServer((socket) => this.accept(entry, inst, runningSince, socket));
    entry.servers.add(server);
    entry.done.push(
      new Promise<void>((resolve) => {
        server.once('close', resolve);
        server.once('error', (err: NodeJS.ErrnoException) => {
          entry.servers.delete(server);
          resolve();
          // The reserved port was taken meanwhile: take a new one and show it.
          if (err.code === 'EADDRINUSE' && port !== 0 && !entry.closed) this.listen(entry, inst, runningSince, which, 0);
        });
      }),
    );
    server.listen({ port, host: HOST, exclusive: true }, () => {
      server.removeAllListeners('error');
      server.on('error', () => undefined);
      if (entry.closed) return void server.close();
      if (port === 0) inst.sshPorts![which] = (server.address() as { port: number }).port;
    });
  }

  private accept(entry: Entry, inst: LiveInstance, runningSince: number, socket: Socket): void {
    if (entry.closed) return void socket.destroy();
    entry.sockets.add(socket);
    socket.on('error', () => undefined); // a client that resets is not our problem
    socket.on('close', () => entry.sockets.delete(socket));
    const profile = inst.hist.profile;
    const late = profile === 'ssh_late' && this.clock.simS() < runningSince + this.cfg.late_s;
    if (profile === 'ssh_no_banner' || late) return void socket.end();
    if (profile === 'ssh_hang') return void socket.setTimeout(this.cfg.hold_ms, () => socket.destroy());
    entry.sshd.inject(socket);
  }

  /** One of sshd's lines, as it happens (ssh-server.ts writes them in OpenSSH's words). */
  private addLine(instanceId: number, line: Line): void {
    const lines = this.logs.get(instanceId) ?? [];
    lines.push(line);
    if (lines.length > SSHD_LINES_KEPT) lines.splice(0, lines.length - SSHD_LINES_KEPT);
    this.logs.set(instanceId, lines);
  }
}

/** Whether the record gives this instance a direct SSH port (a direct runtype on an offer with direct ports). */
function hasDirect(inst: LiveInstance): boolean {
  return inst.offer.direct_port_count > 0 && wantsDirect(inst.params.runtype);
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen({ port: 0, host: HOST, exclusive: true }, () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}
