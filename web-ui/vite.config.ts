import { defineConfig } from 'vite';

// The build is embedded in the magnetar binary (scripts/embed.mjs), so it
// must be self-contained: no CDN, no external fonts. `npm run dev` proxies the
// API to a node on localhost:8080.
export default defineConfig({
  base: '/',
  build: {
    target: 'es2020',
    assetsInlineLimit: 0,
    reportCompressedSize: false,
    sourcemap: false,
  },
  server: {
    proxy: {
      '/admin': 'http://localhost:8080',
      '/metrics': 'http://localhost:8080',
      '/lookup': 'http://localhost:8080',
    },
  },
});
