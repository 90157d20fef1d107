import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Tests import src/ modules directly, not through the Node entry that installs the Node host (files, Dawn).
    setupFiles: ['src/runtime/node-host.ts'],
    // Each file gets its own process: Dawn's device is per process and must be destroyed for it to exit.
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
