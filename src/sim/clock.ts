// The simulator's one clock. Sim time runs `scale` times faster than wall time so that a 60 s
// boot takes 0.6 s at scale 100. Changing the scale re-anchors, so sim time never jumps.
// Rate limits use wall time (they protect the process, not the story); everything else uses sim time.

/** A moment in both clocks: wall milliseconds since the epoch and sim seconds since start. */
export interface SimTime {
  wall_ms: number;
  sim_s: number;
}

export class SimClock {
  private anchorWall: number;
  private anchorSim = 0;

  constructor(
    private readonly now: () => number,
    private scale: number,
  ) {
    this.anchorWall = now();
  }

  wallMs(): number {
    return this.now();
  }

  simS(): number {
    return this.anchorSim + ((this.now() - this.anchorWall) / 1000) * this.scale;
  }

  /** Sim seconds per wall second now. */
  timeScale(): number {
    return this.scale;
  }

  setTimeScale(scale: number): void {
    this.anchorSim = this.simS();
    this.anchorWall = this.now();
    this.scale = scale;
  }

  /** The sim moment a wall moment maps to under the current scale (exact when the scale never changed). */
  simAtWall(wallMs: number): number {
    return this.anchorSim + ((wallMs - this.anchorWall) / 1000) * this.scale;
  }

  stamp(): SimTime {
    return this.stampAtSim(this.simS());
  }

  /** The wall moment a sim moment maps to under the current scale (exact when the scale never changed). */
  stampAtSim(simS: number): SimTime {
    const wall = this.anchorWall + ((simS - this.anchorSim) / this.scale) * 1000;
    return { wall_ms: Math.round(wall), sim_s: round3(simS) };
  }
}

function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}
