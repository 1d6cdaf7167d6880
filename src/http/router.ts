// A small table-driven router, shared by the control API and the marketplace simulator. Paths match
// with or without a trailing slash; `{name}` segments become params (percent-decoded). A path that
// exists under another method is told apart (405, with the methods it does take) from an unknown
// one (404). A malformed percent-escape is the caller's `BadPathError` (a 400).

/** What the router needs of a route; each server adds its own fields (handler, auth, ...). */
export interface RouteSpec {
  method: string;
  /** e.g. `/v1/runs/{id}/events` (no trailing slash). */
  path: string;
}

export type Match<R extends RouteSpec> =
  | { kind: 'found'; route: R; /** `METHOD /path/` as declared, for counters and logs. */ name: string; params: Record<string, string> }
  | { kind: 'method'; name: string; /** The methods this path does take (for an `Allow` header). */ allow: string[] }
  | { kind: 'none' };

/** A path whose percent-escapes cannot be decoded. */
export class BadPathError extends Error {
  constructor(path: string) {
    super(`The path ${JSON.stringify(path.slice(0, 100))} cannot be decoded.`);
  }
}

interface Compiled<R> {
  route: R;
  name: string;
  re: RegExp;
  keys: string[];
}

export class Router<R extends RouteSpec> {
  private readonly table: Compiled<R>[];

  constructor(routes: readonly R[]) {
    this.table = routes.map((route) => {
      const keys: string[] = [];
      const pattern = route.path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{(\w+)\}/g, (_m, k: string) => {
        keys.push(k);
        return '([^/]+)';
      });
      return { route, name: `${route.method} ${route.path}/`, re: new RegExp(`^${pattern}/?$`), keys };
    });
  }

  match(method: string, path: string): Match<R> {
    let pathName: string | undefined;
    const allow: string[] = [];
    for (const c of this.table) {
      const m = c.re.exec(path);
      if (!m) continue;
      if (c.route.method !== method) {
        pathName ??= `${method} ${c.route.path}/`;
        allow.push(c.route.method);
        continue;
      }
      const params: Record<string, string> = {};
      try {
        c.keys.forEach((k, i) => (params[k] = decodeURIComponent(m[i + 1]!)));
      } catch {
        throw new BadPathError(path);
      }
      return { kind: 'found', route: c.route, name: c.name, params };
    }
    return pathName ? { kind: 'method', name: pathName, allow } : { kind: 'none' };
  }
}
