#!/usr/bin/env bash
# Type-checks the Grafana dashboard JSON against Grafana's own published
# schema: the TypeScript types of npm's @grafana/schema (Dashboard, Panel,
# RowPanel, VariableModel, ...), compiled by tsc --strict. The JSON is
# inlined as an object literal typed Dashboard, so a misspelled or unknown
# field (excess property), a wrong type or a missing required field fails.
# Grafana itself cannot run here. The only loosening: a field typed with a
# string enum also takes the enum's values (JSON holds "absolute", not
# ThresholdsMode.Absolute).
#
# The packages are installed once per version pair into
# ~/.cache/khorovod/npm/grafana-schema-<v>-typescript-<v> (outside the clone;
# KHOROVOD_NPM_CACHE overrides the parent), under a lock, from the npm
# registry. Needs node and npm (scripts/install-deps.sh).
# Usage: grafana_schema_check.sh DASHBOARD.json [MORE.json...]
set -euo pipefail
schema_version=13.2.3
typescript_version=5.9.3
[ $# -ge 1 ] || { echo "usage: $0 DASHBOARD.json..." >&2; exit 2; }
command -v npm >/dev/null && command -v node >/dev/null || { echo "grafana_schema_check: node and npm are needed (scripts/install-deps.sh)" >&2; exit 1; }
parent=${KHOROVOD_NPM_CACHE:-$HOME/.cache/khorovod/npm}
cache=$parent/grafana-schema-$schema_version-typescript-$typescript_version
mkdir -p "$parent"
(
  flock -w 600 9 || { echo "grafana_schema_check: timed out waiting for $cache.lock" >&2; exit 1; }
  if [ ! -x "$cache/node_modules/.bin/tsc" ]; then
    tmp=$(mktemp -d "$parent/.install.XXXXXX")
    echo '{"private": true}' > "$tmp/package.json"
    if ! timeout 300 npm install --prefix "$tmp" --no-audit --no-fund --loglevel=error \
        "@grafana/schema@$schema_version" "typescript@$typescript_version" >&2; then
      rm -rf "$tmp"
      echo "grafana_schema_check: npm install of @grafana/schema@$schema_version failed" >&2
      exit 1
    fi
    rm -rf "$cache"
    mv "$tmp" "$cache"
  fi
) 9>"$cache.lock"

work=$(mktemp -d "$cache/.check.XXXXXX")
trap 'rm -rf "$work"' EXIT
status=0
for dashboard in "$@"; do
  python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$dashboard" || { echo "FAIL $dashboard: not JSON"; status=1; continue; }
  {
    echo "import type { Dashboard } from '@grafana/schema';"
    echo 'type Loose<T> = T extends string ? T | `${T}` : T extends Array<infer U> ? Array<Loose<U>> : T extends object ? { [K in keyof T]: Loose<T[K]> } : T;'
    printf 'export const dashboard: Loose<Dashboard> = '
    cat "$dashboard"
    echo ';'
  } > "$work/dashboard.ts"
  if (cd "$cache" && timeout 300 node_modules/.bin/tsc --noEmit --strict --moduleResolution bundler --module esnext \
        --target es2020 "$work/dashboard.ts") > "$work/out.txt" 2>&1; then
    echo "ok   $dashboard: matches @grafana/schema@$schema_version's Dashboard"
  else
    # Line numbers point into the JSON (the generated file adds 3 lines first).
    echo "FAIL $dashboard against @grafana/schema@$schema_version (dashboard.ts line = JSON line + 3):"
    sed "s|$work/||" "$work/out.txt"
    status=1
  fi
done
exit $status
