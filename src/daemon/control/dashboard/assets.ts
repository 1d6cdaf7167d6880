// The dashboard's built files (dist/ui/, made by `npm run build` from src/ui/ with esbuild, and
// shipped in the package): read once, then served from memory. Only the files found there are
// served, by name: a request names a file of that list or gets a 404, so no path reaches the disk.
import { readdirSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { packagePath } from '../../../package-path.js';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

export interface Asset {
  body: Buffer;
  contentType: string;
}

export class DashboardAssets {
  private files: Map<string, Asset> | undefined;

  constructor(private readonly dir = packagePath('dist', 'ui')) {}

  /** The built file of this name, or undefined (none such, or the dashboard was not built). */
  get(name: string): Asset | undefined {
    return this.load().get(name);
  }

  private load(): Map<string, Asset> {
    if (this.files) return this.files;
    const files = new Map<string, Asset>();
    let names: string[] = [];
    try {
      names = readdirSync(this.dir);
    } catch {
      // Not built: every asset answers 404, and the page says how to build it.
    }
    for (const name of names) {
      const contentType = TYPES[extname(name)];
      if (contentType) files.set(name, { body: readFileSync(join(this.dir, name)), contentType });
    }
    this.files = files;
    return files;
  }
}
