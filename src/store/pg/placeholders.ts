// Translates the store's placeholders to Postgres's: `?` (positional) and `@name` (named, bound
// from one object) both become $1, $2, ...; the same name is the same $n each time it appears, so
// Postgres infers its type once. Quoted text, quoted identifiers and comments are left alone.

export interface Translated {
  text: string;
  /** For `@name` placeholders: the name of $1, $2, ...; null for `?` ones. */
  names: string[] | null;
}

export function translatePlaceholders(sql: string): Translated {
  let out = '';
  let positional = 0;
  const names: string[] = [];
  for (let i = 0; i < sql.length;) {
    const c = sql[i]!;
    if (c === "'" || c === '"') {
      const end = sql.indexOf(c, i + 1);
      const stop = end === -1 ? sql.length : end + 1;
      out += sql.slice(i, stop);
      i = stop;
    } else if (c === '-' && sql[i + 1] === '-') {
      const end = sql.indexOf('\n', i);
      const stop = end === -1 ? sql.length : end;
      out += sql.slice(i, stop);
      i = stop;
    } else if (c === '?') {
      out += `$${++positional}`;
      i++;
    } else if (c === '@' && /[A-Za-z_]/.test(sql[i + 1] ?? '')) {
      const name = /^[A-Za-z_][A-Za-z0-9_]*/.exec(sql.slice(i + 1))![0];
      let n = names.indexOf(name);
      if (n === -1) n = names.push(name) - 1;
      out += `$${n + 1}`;
      i += 1 + name.length;
    } else {
      out += c;
      i++;
    }
  }
  if (positional > 0 && names.length > 0) throw new Error(`a statement mixes ? and @name placeholders: ${sql}`);
  return { text: out, names: positional > 0 ? null : names };
}

/** The values for $1, $2, ... from what a statement was called with. */
export function bindValues(t: Translated, params: unknown[]): unknown[] {
  if (t.names === null || t.names.length === 0) return params;
  const named = (params[0] ?? {}) as Record<string, unknown>;
  return t.names.map((name) => {
    if (!(name in named)) throw new Error(`missing named parameter @${name}`);
    return named[name];
  });
}
