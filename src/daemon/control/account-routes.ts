// GET /v1/account and GET /v1/account/checks: the account and the money as they stand, and
// `berth doctor`'s checks made by the daemon with its own key, for the dashboard's Account and
// Money pages (issue #22). The figures are handed in by daemon.ts, which holds the client, the
// account watch and the config.
import { AccountChecksSchema, AccountViewSchema, type AccountChecks, type AccountView } from '../../wire/control-api.js';
import { HttpProblem, type ControlRoute } from './route-types.js';

export interface AccountPort {
  view(): AccountView;
  /** Runs the doctor's checks now (a few calls to the service). */
  checks(signal: AbortSignal): Promise<AccountChecks>;
}

export function accountRoutes(account: AccountPort | undefined): ControlRoute[] {
  const port = () => {
    if (!account) throw new HttpProblem(404, 'not_found', 'This daemon reports no account.');
    return account;
  };
  return [
    {
      method: 'GET',
      path: '/v1/account',
      doc: {
        summary: 'The credit, what is billed now and in the last 24 h against the budget caps, and the rate limits met',
        responses: { 200: { description: 'the account', schema: AccountViewSchema } },
      },
      handle: () => ({ status: 200, body: port().view() }),
    },
    {
      method: 'GET',
      path: '/v1/account/checks',
      doc: {
        summary:
          "`berth doctor`'s checks, made now by the daemon with its own key (the service, the key, its permissions, an SSH key, the credit)",
        responses: { 200: { description: 'the checks', schema: AccountChecksSchema } },
      },
      handle: async () => ({ status: 200, body: await port().checks(AbortSignal.timeout(30_000)) }),
    },
  ];
}
