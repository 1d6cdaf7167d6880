// The CLI proves the daemon before it sends the control token: it asks for the HMAC of a fresh
// nonce under the token (and the address it called), which only a process that holds the token can
// answer. A program squatting the port of a stopped daemon therefore never receives it. Both sides
// compute it here, so the CLI needs nothing from the daemon's rooms.
import { createHmac, timingSafeEqual } from 'node:crypto';

/** What the daemon answers to a challenge: HMAC-SHA256 under the token of the address and nonce. */
export function controlProof(token: string, host: string, nonce: string): string {
  return createHmac('sha256', token).update(`berth-control-proof:v1\n${host}\n${nonce}`).digest('hex');
}

export function proofMatches(token: string, host: string, nonce: string, proof: unknown): boolean {
  if (typeof proof !== 'string') return false;
  const want = Buffer.from(controlProof(token, host, nonce));
  const got = Buffer.from(proof);
  return got.length === want.length && timingSafeEqual(got, want);
}
