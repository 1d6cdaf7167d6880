// The service's error answers. Handlers throw SimHttpError; the server turns it into the status and
// body. Bodies follow the real service: `{success: false, error, msg: "error <status>/<n>: ..."}`.

export type ErrorBody = { success: false; error: string; msg: string; [extra: string]: unknown };

export class SimHttpError extends Error {
  constructor(
    readonly status: number,
    readonly body: ErrorBody,
  ) {
    super(body.msg);
    this.name = 'SimHttpError';
  }
}

function fail(status: number, error: string, n: number, text: string, extra: Record<string, unknown> = {}): SimHttpError {
  return new SimHttpError(status, { success: false, error, msg: `error ${status}/${n}: ${text}`, ...extra });
}

/** An error whose `msg` is the documented text verbatim. */
function documented(status: number, error: string, msg: string, extra: Record<string, unknown> = {}): SimHttpError {
  return new SimHttpError(status, { success: false, error, msg, ...extra });
}

/** 400: a body field of the wrong type or value. */
export const invalidArgs = (text: string) => fail(400, 'invalid_args', 3001, text);
/** 400: the body is not JSON or not an object. */
export const invalidRequest = (text: string) => fail(400, 'invalid_request', 3000, text);
export const invalidPrice = (text: string) => fail(400, 'invalid_price', 3005, text);
export const notFound = (text: string) => fail(404, 'not_found', 3100, text);
/** label_instance.yaml's 404 (manage, stop, start, label). */
export const noSuchInstance = (id: number) => documented(404, 'no_such_instance', `Instance ${id} not found.`);
/** destroy_instance.yaml's 404. */
export const destroyNotFound = () => documented(404, 'not_found', 'Instance not found');
/** destroy_instance.yaml's 400 (the simulator's answer for an instance already destroyed). */
export const destroyInvalidId = () => documented(400, 'invalid_args', 'invalid instance_id');
/** change_bid.yaml's 404. */
export const bidNoSuchInstance = () => documented(404, 'no_such_instance', 'Instance with that ID does not exist.');
/** label_instance.yaml's 400. */
export const labelTooLong = () => documented(400, 'label_too_long', 'Please limit label length to 1024 characters, ideally less than 128.');
/** manage_instance.yaml's error enum: starting needs credit. */
export const missingBilling = () =>
  documented(400, 'missing_billing', 'error 400/3420: Your account has no credit; add credit or a payment method to start instances.');
export const payloadTooLarge = () => fail(413, 'invalid_request', 3002, 'Request body too large.');
export const methodNotAllowed = (method: string) => fail(405, 'method_not_allowed', 3003, `Method ${method} not allowed here.`);

/** 404 for an offer id that never existed (the service's own, odd, error code). */
export function unknownAsk(offerId: number): SimHttpError {
  return new SimHttpError(404, {
    success: false,
    error: 'invalid_args',
    msg: `error 404/3603: no_such_ask Instance type by id ${offerId} is not available.`,
    ask_id: offerId,
  });
}

/** The same error with the offer's `ask_id`, as create's 4xx bodies carry it. */
export function withAskId(err: SimHttpError, offerId: number): SimHttpError {
  return new SimHttpError(err.status, { ...err.body, ask_id: offerId });
}

/** create_instance.yaml's 403: about the offer, not the key. */
export function notYourOwn(offerId: number): SimHttpError {
  return documented(403, 'invalid_args', `error 403/3586: Offer ${offerId} is not your own. Hosts can only rent their own machines.`, {
    ask_id: offerId,
  });
}

/** 410 for an offer that exists but is rented. */
export function askGone(offerId: number): SimHttpError {
  return new SimHttpError(410, {
    success: false,
    error: 'no_such_ask',
    msg: `error 410/3907: no_such_ask Instance type ${offerId} is no longer available.`,
    ask_id: offerId,
  });
}

export const AUTH_ERROR: ErrorBody = { success: false, error: 'auth_error', msg: 'Invalid user key' };
/** show_charges.yaml's 403 for a request without an Authorization header. */
export const LOGIN_REQUIRED: ErrorBody = { success: false, error: 'auth_error', msg: 'This action requires login.' };

export function permissionDenied(category: string, detail = ''): SimHttpError {
  return new SimHttpError(403, {
    success: false,
    error: 'permission_denied',
    msg: `error 403/1010: this endpoint requires permission ${category}${detail ? ` (${detail})` : ''}`,
    permission: category,
  });
}

export function deprecatedEndpoint(): SimHttpError {
  return new SimHttpError(410, {
    success: false,
    error: 'deprecated_endpoint',
    msg: 'error 410/1: GET /api/v0/instances/ is deprecated; use GET /api/v1/instances/ with limit and after_token.',
  });
}
