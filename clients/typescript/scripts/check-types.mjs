// npm run check-types: regenerate the types from schemas/openapi.yaml into
// a temporary file and fail when they differ from src/schema.ts, so the
// spec and the checked-in types cannot drift.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const dir = mkdtempSync(join(tmpdir(), "eskv-types-"));
try {
  const fresh = join(dir, "schema.ts");
  execFileSync(process.execPath, ["scripts/gen.mjs", fresh], { stdio: "inherit" });
  const want = readFileSync(fresh, "utf8");
  const have = readFileSync("src/schema.ts", "utf8");
  if (want !== have) {
    const a = have.split("\n"), b = want.split("\n");
    let i = 0;
    while (i < a.length && a[i] === b[i]) i++;
    console.error(`src/schema.ts differs from schemas/openapi.yaml's types from line ${i + 1}:`);
    console.error(`  checked in: ${a[i] ?? "(end of file)"}`);
    console.error(`  generated:  ${b[i] ?? "(end of file)"}`);
    console.error("run npm run gen in clients/typescript and commit src/schema.ts");
    process.exit(1);
  }
  console.log("src/schema.ts matches schemas/openapi.yaml");
} finally {
  rmSync(dir, { recursive: true, force: true });
}
