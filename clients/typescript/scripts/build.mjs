// npm run build: dist/esm (ES modules) and dist/cjs (CommonJS, marked so
// by its own package.json) with their declarations, tsc only.
import { execFileSync } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";

const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
rmSync("dist", { recursive: true, force: true });
for (const project of ["tsconfig.json", "tsconfig.cjs.json"]) {
  try {
    execFileSync(process.execPath, [tsc, "-p", project], { stdio: "inherit" });
  } catch {
    console.error(`tsc -p ${project} failed`);
    process.exit(1);
  }
}
mkdirSync("dist/cjs", { recursive: true });
writeFileSync("dist/cjs/package.json", JSON.stringify({ type: "commonjs" }) + "\n");
writeFileSync("dist/esm/package.json", JSON.stringify({ type: "module" }) + "\n");
