// Vite builds web/ into web/dist, which kandev serves (and embeds in release builds).
// JSX uses React's automatic runtime through esbuild; no React plugin is needed.
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
});
