// A stub run actor as the daemon provides one (src/daemon/runs/run-actors.ts): its rejections reach
// the run machine as failures carrying the policy's verdict and the (fake or real) time.
import { fromPromise } from 'xstate';
import { asRunActor } from '../../src/daemon/runs/actor-failure.js';

export const stubActor = <O, I>(work: (args: { input: I; signal: AbortSignal }) => Promise<O>) =>
  fromPromise<O, I>(({ input, signal }) => asRunActor(() => work({ input, signal }), Date.now));
