import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    // The second builds the local busybox base image once and removes every labelled test resource at the end.
    globalSetup: ['test/global-setup.ts', 'test/factories/images.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Each file uses its own SQLite file and its own PostgreSQL database, so files run in parallel.
    fileParallelism: true,
  },
});
