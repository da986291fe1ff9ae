// Builds the dashboard into dist/: one script, one stylesheet, PatternFly's
// fonts and images beside them, and the page that loads them. The output
// depends only on the sources and the locked packages.
import * as esbuild from 'esbuild';
import { mkdirSync, rmSync, writeFileSync, readdirSync } from 'node:fs';

const out = 'dist';
for (const f of readdirSync(out, { withFileTypes: true })) {
  if (f.name !== 'README.md') rmSync(`${out}/${f.name}`, { recursive: true, force: true });
}
mkdirSync(out, { recursive: true });
const result = await esbuild.build({
  entryPoints: { app: 'src/main.tsx' },
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['chrome120', 'firefox120', 'safari17'],
  jsx: 'automatic',
  outdir: out,
  assetNames: 'assets/[name]-[hash]',
  loader: { '.woff': 'file', '.woff2': 'file', '.ttf': 'file', '.svg': 'file', '.png': 'file', '.jpg': 'file', '.gif': 'file' },
  define: { 'process.env.NODE_ENV': '"production"' },
  legalComments: 'linked',
  metafile: true,
  logLevel: 'warning',
});
writeFileSync(`${out}/index.html`, `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Torus: MPI jobs</title>
<link rel="stylesheet" href="/app.css">
<script type="module" src="/app.js"></script>
</head>
<body>
<div id="root"></div>
</body>
</html>
`);
const bytes = Object.values(result.metafile.outputs).reduce((n, o) => n + o.bytes, 0);
console.log(`dashboard: ${Object.keys(result.metafile.outputs).length} files, ${(bytes / 1024).toFixed(0)} KiB in ${out}/`);
