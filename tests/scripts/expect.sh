# shellcheck shell=bash disable=SC2034  # root, tmp: for the tests that source this
# Sourced by the tests of the scripts/ checks: `root` (the clone), `tmp` (a
# temporary folder removed on exit), `expect DESCRIPTION GOT WANT` (counts
# and reports), and `finish NAME` (the "NAME: N passed, M failed" line and
# the exit status).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok=0 bad=0
expect() { if [ "$2" = "$3" ]; then ok=$((ok + 1)); else bad=$((bad + 1)); echo "FAIL: $1: got '$2', want '$3'"; fi; }
finish() { echo "$1: $ok passed, $bad failed"; [ "$bad" -eq 0 ]; }
