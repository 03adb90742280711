// npm run gen: src/schema.ts from ../../schemas/openapi.yaml
// (openapi-typescript); with an argument, into that file instead (the
// drift check, scripts/check-types.mjs).
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

const require = createRequire(import.meta.url);
const pkg = require.resolve("openapi-typescript/package.json");
const bin = join(dirname(pkg), require(pkg).bin["openapi-typescript"]);
const out = process.argv[2] ?? "src/schema.ts";
execFileSync(process.execPath, [bin, "../../schemas/openapi.yaml", "--default-non-nullable", "false", "--output", out], {
  stdio: ["ignore", "ignore", "inherit"],
});
