#!/usr/bin/env bash
# The lint stage (scripts/test.sh --stage lint): the repository's own gates.
#   clang-format  every tracked C/C++ file matches .clang-format (Debian 12's
#                 clang-format 14, installed by scripts/install-deps.sh)
#   ruff          `ruff check` and `ruff format --check` with ruff.toml
#                 (ruff pinned below, from PyPI into a venv cached outside the clone)
#   scripts       every tracked shell script through shellcheck, warnings and errors (-S warning)
# Each gate is one check; the closing line is the stage's summary.
# Fix what a gate reports with: tests/lint/run.sh --fix (formats C++ and
# Python; shellcheck findings are fixed by hand).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
RUFF_VERSION=0.17.6
cache=${KHOROVOD_CACHE:-$HOME/.cache/khorovod}
venv="$cache/venv-ruff-$RUFF_VERSION"
fix=0; [ "${1:-}" = --fix ] && fix=1
passed=0; failed=0
check() {  # check NAME COMMAND...: one gate
  local name=$1; shift
  local out; out=$("$@" 2>&1); local rc=$?
  if [ $rc -eq 0 ]; then passed=$((passed + 1)); echo "lint: $name: ok"
  else failed=$((failed + 1)); echo "$out" | head -60; echo "FAIL: lint: $name (rc $rc)"; fi
}
if [ ! -x "$venv/bin/ruff" ]; then
  rm -rf "$venv"
  timeout 300 python3 -m venv "$venv" && timeout 300 "$venv/bin/pip" install -q "ruff==$RUFF_VERSION" \
    || { echo "lint: BROKEN: could not install ruff $RUFF_VERSION from PyPI"; echo "lint: 0 passed, 1 failed"; exit 1; }
fi
mapfile -t cxx < <(git ls-files -- '*.h' '*.cc' '*.cpp' '*.hpp' ':!:third_party/**' ':!:**/third_party/**')
mapfile -t shells < <(git ls-files -- '*.sh')
if [ $fix -eq 1 ]; then
  printf '%s\0' "${cxx[@]}" | xargs -0 -n 50 clang-format -i
  "$venv/bin/ruff" check --fix -q . ; "$venv/bin/ruff" format -q .
fi
check "clang-format (${#cxx[@]} files)" bash -c 'printf "%s\0" "$@" | xargs -0 -n 50 clang-format --dry-run --Werror' _ "${cxx[@]}"
check "ruff check" "$venv/bin/ruff" check --no-cache --output-format concise .
check "ruff format" "$venv/bin/ruff" format --no-cache --check .
check "shellcheck (${#shells[@]} scripts)" shellcheck -S warning -x -P SCRIPTDIR "${shells[@]}"
echo "lint: $passed passed, $failed failed"
[ $failed -eq 0 ]
