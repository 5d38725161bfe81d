// Vite builds web/ into web/dist, which kandev serves (and embeds in release builds); vitest
// runs the unit tests (`src/**/*.test.ts`) with the same transform.
// JSX uses React's automatic runtime through esbuild; no React plugin is needed.
/// <reference types="vitest/config" />
import { defineConfig } from 'vite';

export default defineConfig({
  esbuild: { jsx: 'automatic' },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    sourcemap: false,
    chunkSizeWarningLimit: 800,
  },
  server: {
    // `npm run dev` proxies the API to a kandev started with ./scripts/run.
    proxy: {
      '/api': 'http://127.0.0.1:38429',
      '/ws': { target: 'ws://127.0.0.1:38429', ws: true },
    },
  },
  test: {
    // Only the unit tests: e2e/*.spec.ts are Playwright's (npm run e2e).
    include: ['src/**/*.test.ts'],
  },
});
