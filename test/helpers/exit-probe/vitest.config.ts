// The suite's own configuration (its global setup, the test Postgres, included), running only the
// probe beside this file: what `npm test` exits with when a test fails.
import { defineConfig } from 'vitest/config';
import suite from '../../../vitest.config.js';

export default defineConfig({ ...suite, test: { ...suite.test, include: ['test/helpers/exit-probe/*.probe.ts'] } });
