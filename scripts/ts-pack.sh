#!/usr/bin/env bash
# The TypeScript SDK as a new user gets it (sdk/typescript/README.md): on a
# copy of the repository's files as a fresh clone has them (no
# node_modules, no dist), runs the README's install commands in order
# (npm pack in sdk/typescript, a new ES module project, npm install of the
# tarball), checks the tarball (dist/ with types, LICENSE, repository,
# homepage and bugs in package.json), compiles the README's TypeScript
# example with tsc in that project, and imports the package from it and
# from a default (CommonJS) project. Run by scripts/ts.sh (.ci/ts); about a
# minute, most of it npm ci inside npm pack.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
export npm_config_cache="$root/.cache/npm" npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false

work=$(mktemp -d /tmp/custody-ts-pack.XXXXXX)
trap 'rm -rf "$work"' EXIT
# "git clone": the files a clone has (tracked, or new and not ignored).
mkdir -p "$work/custody"
git ls-files -co --exclude-standard -- sdk/typescript LICENSE | tar -cf - -T - | tar -xf - -C "$work/custody"
test ! -e "$work/custody/sdk/typescript/dist" && test ! -e "$work/custody/sdk/typescript/node_modules"

readme="$root/sdk/typescript/README.md"
# The README's first shell block is the install; its git clone line is the copy above.
install=$(awk '/^```sh$/{on=1; next} on && /^```$/{exit} on' "$readme")
grep -q '^git clone ' <<<"$install" || { echo "ts-pack: the SDK README's first shell block has no git clone line" >&2; exit 1; }
echo "== the SDK README's install commands, in order"
(cd "$work" && bash -euo pipefail -c "$(grep -v '^git clone ' <<<"$install")" >"$work/install.log" 2>&1) || { cat "$work/install.log"; exit 1; }

version=$(node -p 'require(process.argv[1]).version' "$root/sdk/typescript/package.json")
tgz="$work/custody/sdk/typescript/custodylog-custody-$version.tgz"
test -f "$tgz" || { echo "ts-pack: npm pack wrote no $(basename "$tgz") (the README names the tarball of version $version?)" >&2; ls "$work/custody/sdk/typescript" >&2; exit 1; }
echo "== the tarball"
files=$(tar -tzf "$tgz")
for f in package/dist/index.js package/dist/index.d.ts package/LICENSE package/README.md package/package.json; do
  grep -qx "$f" <<<"$files" || { echo "ts-pack: $f is not in the tarball:" >&2; echo "$files" >&2; exit 1; }
done
cmp -s <(tar -xzOf "$tgz" package/LICENSE) "$root/LICENSE" || { echo "ts-pack: the tarball's LICENSE is not the repository's" >&2; exit 1; }
tar -xzOf "$tgz" package/package.json | node -e '
  const p = JSON.parse(require("fs").readFileSync(0, "utf8"));
  for (const k of ["repository", "homepage", "bugs", "license"]) if (!p[k]) { console.error("ts-pack: package.json has no " + k); process.exit(1); }'
echo "$(grep -c . <<<"$files") files, dist/ and LICENSE included"

agent="$work/my-agent"
test -f "$agent/node_modules/@custodylog/custody/dist/index.js" || { echo "ts-pack: the README's npm install left no package in my-agent" >&2; exit 1; }
echo "== the README's example compiles (tsc, in the README's ES module project)"
awk '/^```ts$/{on=1; next} on && /^```$/{exit} on' "$readme" >"$agent/agent.ts"
grep -q '@custodylog/custody' "$agent/agent.ts" || { echo "ts-pack: no TypeScript example in the SDK README" >&2; exit 1; }
devdeps=$(node -p 'const d = require(process.argv[1]).devDependencies; Object.entries(d).map(([k, v]) => k + "@" + v).join(" ")' "$root/sdk/typescript/package.json")
(cd "$agent" && npm install --no-save $devdeps >/dev/null 2>&1)
cat >"$agent/tsconfig.json" <<'JSON'
{"compilerOptions": {"module": "nodenext", "target": "es2022", "strict": true, "noEmit": true, "types": ["node"], "skipLibCheck": false}, "files": ["agent.ts"]}
JSON
(cd "$agent" && npx --no-install tsc -p tsconfig.json)
echo "== import from the ES module project and from a default (CommonJS) project"
(cd "$agent" && node --input-type=module -e 'import { Client, Runtime, parseCanonical } from "@custodylog/custody"; if (typeof Client !== "function" || typeof Runtime !== "function") process.exit(1); console.log("import ok:", typeof parseCanonical);')
cjs="$work/cjs-project"
mkdir -p "$cjs" && (cd "$cjs" && npm init -y >/dev/null && npm install "$tgz" >/dev/null 2>&1)
(cd "$cjs" && node -e 'import("@custodylog/custody").then((m) => { if (typeof m.Client !== "function") process.exit(1); console.log("dynamic import from CommonJS ok"); })')
echo "== ts-pack passed"
