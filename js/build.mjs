// Bundles js/src/<widget>.ts into langfx_nb/notebook/static/<widget>.js (ESM, everything
// inlined: no CDN, no network at runtime). Each bundle starts with a hash of js/src so a
// Python test can tell when a committed bundle is stale.
//   node build.mjs            build the widget bundles
//   node build.mjs --tests    also bundle js/test/*.test.ts into .test-build/ for `node --test`
//   node build.mjs --out DIR  write the widget bundles to DIR instead
import { build } from "esbuild";
import { createHash } from "node:crypto";
import { readFileSync, readdirSync, mkdirSync, rmSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const src = join(here, "src");
const args = process.argv.slice(2);
const outIdx = args.indexOf("--out");
const outDir = outIdx >= 0 ? resolve(args[outIdx + 1]) : join(here, "..", "langfx_nb", "notebook", "static");
export const ENTRIES = ["trace_explorer", "approval", "stream_view", "batch_view", "eval_report"];

/** sha256 over (posix relative path, NUL, bytes, NUL) of every file under js/src, sorted. */
export function sourceHash() {
  const files = [];
  const walk = (dir) => {
    for (const ent of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, ent.name);
      if (ent.isDirectory()) walk(p);
      else files.push(p);
    }
  };
  walk(src);
  const rel = files.map((f) => relative(src, f).split("\\").join("/")).sort();
  const hash = createHash("sha256");
  for (const r of rel) {
    hash.update(r + "\0");
    hash.update(readFileSync(join(src, r)));
    hash.update("\0");
  }
  return hash.digest("hex");
}

const digest = sourceHash();
mkdirSync(outDir, { recursive: true });
await build({
  entryPoints: ENTRIES.map((e) => join(src, `${e}.ts`)),
  outdir: outDir,
  bundle: true,
  format: "esm",
  target: "es2020",
  minify: true,
  legalComments: "none",
  banner: { js: `// langfx-src-sha256: ${digest}\n// Built from js/src by js/build.mjs; do not edit.` },
  logLevel: "warning",
});

if (args.includes("--tests")) {
  const testDir = join(here, "test");
  const out = join(here, ".test-build");
  rmSync(out, { recursive: true, force: true });
  await build({
    entryPoints: readdirSync(testDir).filter((f) => f.endsWith(".test.ts")).map((f) => join(testDir, f)),
    outdir: out,
    outExtension: { ".js": ".mjs" },
    bundle: true,
    format: "esm",
    platform: "node",
    target: "node20",
    logLevel: "warning",
  });
}
console.log(`built ${ENTRIES.join(", ")} → ${relative(process.cwd(), outDir) || "."} (src ${digest.slice(0, 12)})`);
