#!/usr/bin/env bash
# docs/openapi.yaml through Redocly's OpenAPI linter, from the npm registry, installed once into
# the build tree (a test tool: never part of what fencekit installs or runs).
# Usage: openapi_lint.sh TOOLS_DIR SPEC CONFIG
set -euo pipefail
tools="$1" spec="$2" config="$3"
redocly="$tools/node_modules/.bin/redocly"
if [ ! -x "$redocly" ]; then
  mkdir -p "$tools"
  npm install --prefix "$tools" --no-audit --no-fund --loglevel=error @redocly/cli@2.77.0
fi
# Warnings fail too (redocly exits 0 on them): the spec is small enough to keep clean.
out="$("$redocly" lint --config "$config" --max-problems 50 "$spec" 2>&1)" || { echo "$out"; exit 1; }
echo "$out"
grep -q "Your API description is valid" <<<"$out"
