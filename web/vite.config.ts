/**
 * Vite build of the explorer page. The output lands in the Python package's static folder, which
 * `mirai serve` serves at `/`. `npm run dev` proxies the API to a server on MIRAI_URL (default :8000).
 */
import { defineConfig } from "vite";

const backend = process.env.MIRAI_URL ?? "http://127.0.0.1:8000";
const apiPaths = [
  "/generate_ir",
  "/free_ir_cache",
  "/version",
  "/jobs",
  "/status",
  "/permalinks",
  "/ir_types",
  "/tools",
  "/catalog",
];

export default defineConfig({
  base: "./",
  build: {
    outDir: "../mirai/explorer/static",
    emptyOutDir: true,
    chunkSizeWarningLimit: 1500,
  },
  server: {
    proxy: Object.fromEntries(apiPaths.map((p) => [p, backend])),
  },
});
