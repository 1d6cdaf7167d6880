// How the end of the service's cloud copy is seen: only in the instance's status bar, the
// `status_msg` of the instance list, about 30 s late. Source: vast.py's `cloud__copy` (vast-ai/vast-cli),
// after a 200: "Cloud Copy Started - check instance status bar for progress updates (~30 seconds
// delayed). When the operation is finished you should see 'Cloud Copy Operation Finished' in the
// instance status bar." The docs (cloud_copy.yaml, guides/instances/storage/cloud-sync.mdx) give no
// other words.
//
// Only the finished phrase is documented. How a failed or canceled copy reads is not: the words
// matched below are the simulator's (src/sim/cloud-copies.ts), which a real failure may not use, so
// a caller must bound its wait (a copy that never says "Finished" has not finished). A "Finished"
// can also be an earlier copy's, left in the status bar: a caller trusts it only after it saw
// another line since its own copy started, or once the ~30 s delay has passed.

const FINISHED = /cloud copy operation finished/i;
const FAILED = /cloud copy operation (failed|canceled|cancelled)/i;

/** The status bar says a cloud copy finished (vast.py `cloud__copy`: "Cloud Copy Operation Finished"). */
export function cloudCopyFinished(statusMsg: string | null | undefined): boolean {
  return typeof statusMsg === 'string' && FINISHED.test(statusMsg);
}

/**
 * The status bar says a cloud copy ended without finishing: failed or canceled. The service's words
 * for these are not documented; these are the simulator's ("Cloud Copy Operation Failed: ...",
 * "Cloud Copy Operation Canceled").
 */
export function cloudCopyFailed(statusMsg: string | null | undefined): boolean {
  return typeof statusMsg === 'string' && FAILED.test(statusMsg);
}
