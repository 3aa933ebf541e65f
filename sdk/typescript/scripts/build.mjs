// Compiles src/ into dist/ with the TypeScript the lock file pins. npm runs
// it as the package's "prepare" script: on `npm pack` and `npm publish`,
// and on `npm install` from a clone or a git URL. On a fresh clone, with
// no node_modules yet, it first installs the dev dependencies from the
// lock file (npm ci), so that `npm pack` alone makes a tarball with dist/.
// Everything it prints goes to standard error: `npm pack` prints the
// tarball's name on standard output, and scripts read it.
import { existsSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const pkg = dirname(dirname(fileURLToPath(import.meta.url)));
const tsc = join(pkg, "node_modules", "typescript", "bin", "tsc");
const quiet = { cwd: pkg, stdio: ["ignore", 2, 2] };
if (!existsSync(tsc)) {
  console.error("@custodylog/custody: installing the build's dev dependencies (npm ci)");
  const npm = process.env.npm_execpath;
  const ci = ["ci", "--ignore-scripts", "--no-audit", "--no-fund"];
  if (npm && npm.endsWith(".js")) execFileSync(process.execPath, [npm, ...ci], quiet);
  else execFileSync(process.platform === "win32" ? "npm.cmd" : "npm", ci, quiet);
}
execFileSync(process.execPath, [tsc, "-p", "tsconfig.json"], quiet);
