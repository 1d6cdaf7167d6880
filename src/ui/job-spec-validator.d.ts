// The job spec's JSON Schema compiled by ajv at build time (scripts/build-ui.mjs makes this module).
declare module 'virtual:job-spec-validator' {
  interface AjvError {
    instancePath: string;
    keyword: string;
    message?: string;
    params: Record<string, unknown>;
  }
  const validate: ((data: unknown) => boolean) & { errors?: AjvError[] | null };
  export default validate;
}
