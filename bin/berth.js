#!/usr/bin/env node
// The published entry point: runs the compiled CLI (built by `npm install` through `prepare`).
import { main } from '../dist/src/cli/main.js';

main(process.argv).then(
  (code) => {
    if (typeof code === 'number') process.exitCode = code;
  },
  (err) => {
    console.error(err instanceof Error ? err.message : String(err));
    process.exitCode = 1;
  },
);
