// The SDK's modules import one another in one direction: no cycle, type
// imports included (a cycle through `import type` still ties two modules
// together for a reader and for bundlers that keep it).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";

const src = new URL("../src/", import.meta.url);

function importsOf(file) {
  const text = readFileSync(new URL(file, src), "utf8");
  const out = new Set();
  for (const m of text.matchAll(/^\s*(?:import|export)\s[^;]*?from\s+"\.\/([^"]+)\.js"/gms)) out.add(m[1] + ".ts");
  return [...out];
}

test("no import cycle among src/*.ts", () => {
  const files = readdirSync(src).filter((f) => f.endsWith(".ts"));
  assert.ok(files.includes("client.ts") && files.includes("events.ts"));
  const graph = new Map(files.map((f) => [f, importsOf(f)]));
  const state = new Map(); // 1: on the path, 2: done
  const path = [];
  function visit(f) {
    if (state.get(f) === 2) return;
    if (state.get(f) === 1) {
      assert.fail(`import cycle: ${[...path.slice(path.indexOf(f)), f].join(" -> ")}`);
    }
    state.set(f, 1);
    path.push(f);
    for (const g of graph.get(f) ?? []) visit(g);
    path.pop();
    state.set(f, 2);
  }
  for (const f of files) visit(f);
});
