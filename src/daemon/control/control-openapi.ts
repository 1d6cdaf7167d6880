// GET /v1/openapi.json: an OpenAPI 3.1 document of the control API, generated from the route table
// (./control-routes.ts: each route carries its doc) and the zod schemas of src/wire/control-api.ts
// that the daemon answers with, through zod's own JSON Schema output (draft 2020-12, which OpenAPI
// 3.1 uses). Nothing in it is written by hand but the words, so a route or a field cannot be
// added without the document showing it. The job spec is the same JSON Schema `berth schema` prints.
import { z } from 'zod';
import { jobSpecSchema } from '../../job-spec/schema.js';
import { jobSpecJsonSchema } from '../../job-spec/validate.js';
import { packageVersion } from '../../package-path.js';
import {
  AccountChecksSchema,
  AccountViewSchema,
  BlobSchema,
  CostsReportSchema,
  OffersReportSchema,
  ErrorEnvelopeSchema,
  HealthSchema,
  NotificationListSchema,
  NotificationSchema,
  ProofSchema,
  RotatedSchema,
  RunEventListSchema,
  RunEventSchema,
  RunListSchema,
  RunLogsSchema,
  RunSchema,
  SignInCodeSchema,
  StreamEventSchema,
  StreamOutputSchema,
  UiSessionSchema,
  CancelBodySchema,
} from '../../wire/control-api.js';
import type { ControlRoute } from './route-types.js';

/** The document's named schemas: every schema a route doc names must be one of these. */
const COMPONENTS: Record<string, z.ZodType> = {
  Run: RunSchema,
  RunList: RunListSchema,
  RunEvent: RunEventSchema,
  RunEventList: RunEventListSchema,
  RunLogs: RunLogsSchema,
  StreamEvent: StreamEventSchema,
  StreamOutput: StreamOutputSchema,
  Notification: NotificationSchema,
  NotificationList: NotificationListSchema,
  Health: HealthSchema,
  Proof: ProofSchema,
  Rotated: RotatedSchema,
  SignInCode: SignInCodeSchema,
  AccountView: AccountViewSchema,
  AccountChecks: AccountChecksSchema,
  UiSession: UiSessionSchema,
  CostsReport: CostsReportSchema,
  OffersReport: OffersReportSchema,
  Blob: BlobSchema,
  CancelBody: CancelBodySchema,
  ErrorEnvelope: ErrorEnvelopeSchema,
};

/** Error statuses in words; every route may answer 400, 403 and 500, and every guarded one 401. */
const ERROR_TEXT: Record<number, string> = {
  400: 'bad_request (a target, query or nonce that cannot be read) or spec (an invalid job spec, with issues)',
  401: 'unauthorized: no or wrong control token, or an ended dashboard session',
  403: "forbidden: the Host is not the daemon's own address, an Origin not the daemon's own was sent, or a dashboard session changed state without its X-CSRF-Token (or called a token-only route)",
  404: 'not_found: no such run',
  405: 'method_not_allowed (with an Allow header)',
  409: 'idempotency_conflict (with run_id) or not_held',
  413: 'too_large: a body over 1 MiB',
  415: 'unsupported_media_type: a body that is not application/json',
  500: 'internal: a bug; see the daemon log',
  502: "service_error: the marketplace's search failed (POST /v1/offers)",
  503: 'daemon_stopping, or store_unavailable while berth.db refuses writes (retry later)',
};

const ref = (id: string) => ({ $ref: `#/components/schemas/${id}` });

/** zod's JSON Schema of each component, with references between them, as OpenAPI components. */
function componentSchemas(): { schemas: Record<string, unknown>; idOf: Map<z.ZodType, string> } {
  const registry = z.registry<{ id: string }>();
  const idOf = new Map<z.ZodType, string>();
  for (const [id, schema] of Object.entries(COMPONENTS)) {
    registry.add(schema, { id });
    idOf.set(schema, id);
  }
  const out = z.toJSONSchema(registry, { uri: (id) => `#/components/schemas/${id}` }).schemas as Record<string, Record<string, unknown>>;
  const schemas: Record<string, unknown> = {};
  // Inside an OpenAPI document the dialect is the document's and the id is the component's path.
  for (const [id, { $schema: _dialect, $id: _id, ...schema }] of Object.entries(out)) schemas[id] = schema;
  const { $schema: _dialect, ...jobSpec } = jobSpecJsonSchema() as Record<string, unknown>;
  schemas.JobSpec = jobSpec;
  idOf.set(jobSpecSchema, 'JobSpec');
  return { schemas, idOf };
}

export function openApiDocument(routes: readonly ControlRoute[], serverUrl?: string): Record<string, unknown> {
  const { schemas, idOf } = componentSchemas();
  const named = (schema: z.ZodType, where: string) => {
    const id = idOf.get(schema);
    if (!id) throw new Error(`${where}: its schema is not one of the OpenAPI components (src/daemon/control/control-openapi.ts)`);
    return ref(id);
  };
  const errorAnswer = (status: number) => ({
    description: ERROR_TEXT[status] ?? 'an error',
    content: { 'application/json': { schema: ref('ErrorEnvelope') } },
  });

  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const where = `${route.method} ${route.path}`;
    const { doc } = route;
    const parameters = [
      ...[...route.path.matchAll(/\{(\w+)\}/g)].map(([, name]) => ({ name, in: 'path', required: true, schema: { type: 'string' } })),
      ...(doc.query ?? []).map((q) => ({ name: q.name, in: 'query', required: false, description: q.description, schema: q.schema })),
      ...(doc.headers ?? []).map((h) => ({ name: h.name, in: 'header', required: false, description: h.description, schema: h.schema })),
    ];
    const responses: Record<string, unknown> = {};
    for (const [status, answer] of Object.entries(doc.responses)) {
      const content: Record<string, unknown> = {};
      for (const contentType of (answer.contentType ?? 'application/json').split(',').map((t) => t.trim())) {
        const media: Record<string, unknown> = {
          schema: answer.schema ? named(answer.schema, where) : { type: contentType === 'application/json' ? 'object' : 'string' },
        };
        // OpenAPI 3.1 has no schema for the items of a stream; 3.2's `itemSchema` says it, as an extension here.
        if (answer.itemSchema) media['x-item-schema'] = named(answer.itemSchema, where);
        content[contentType] = media;
      }
      responses[status] = { description: answer.description, content };
    }
    const errors = new Set([400, 403, 500, ...(route.auth === 'open' ? [] : [401]), ...(doc.errors ?? [])]);
    for (const status of [...errors].sort()) responses[String(status)] = errorAnswer(status);
    const operation: Record<string, unknown> = {
      operationId: `${route.method.toLowerCase()}${route.path.replace(/\{(\w+)\}/g, 'By_$1').replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ?? '').toUpperCase())}`,
      summary: doc.summary,
      ...(doc.description ? { description: doc.description } : {}),
      ...(parameters.length > 0 ? { parameters } : {}),
      ...(doc.body
        ? { requestBody: { required: doc.bodyOptional !== true, content: { 'application/json': { schema: named(doc.body, where) } } } }
        : {}),
      responses,
      // An open route needs no token; a token-only one takes no dashboard session.
      ...(route.auth === 'open' ? { security: [] } : route.auth === 'token' ? { security: [{ controlToken: [] }] } : {}),
    };
    (paths[route.path] ??= {})[route.method.toLowerCase()] = operation;
  }

  return {
    openapi: '3.1.0',
    info: {
      title: 'berth control API',
      version: packageVersion(),
      description:
        'The local HTTP API of the berth daemon: loopback only. Every route but the open ones needs `Authorization: Bearer <BERTH_HOME/control.token>`, or the web dashboard\'s session cookie (signed in with a one-time code from `berth ui`); with the cookie, every request but a GET must carry the session\'s `X-CSRF-Token` (GET /v1/ui/session) and the daemon\'s own Origin. A request whose Host is not the daemon\'s own address, or that carries another Origin, is refused (403); a body that is not application/json gets 415. Errors are `{"error": {"kind", "message"}}`.',
    },
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    ...(serverUrl ? { servers: [{ url: serverUrl }] } : {}),
    security: [{ controlToken: [] }, { dashboardSession: [] }],
    paths,
    components: {
      schemas,
      securitySchemes: {
        controlToken: { type: 'http', scheme: 'bearer', description: 'the content of BERTH_HOME/control.token' },
        dashboardSession: {
          type: 'apiKey',
          in: 'cookie',
          name: 'berth_session_PORT',
          description:
            "the web dashboard: set by GET /?code= (a code from POST /v1/ui/codes), PORT being the daemon's; HttpOnly, SameSite=Strict",
        },
      },
    },
  };
}
