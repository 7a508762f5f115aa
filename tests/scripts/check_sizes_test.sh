#!/usr/bin/env bash
# scripts/check_sizes.py: passes on the tree, and fails on a copy of it with
# a production file over 500 lines, a C++ function over 100 lines (braces in
# comments and literals do not fool it) or a Python function over 100 lines.
source "$(dirname "$0")/expect.sh"
check() { python3 "$root/scripts/check_sizes.py" "$1" > "$tmp/out" 2>&1; echo $?; }
fresh() { rm -rf "$tmp/tree"; mkdir -p "$tmp/tree"; cp -r "$root/runtime" "$root/python" "$tmp/tree/"; }
# A C++ function of $1 body lines, with braces inside a comment and literals.
cpp_function() {
  echo 'namespace khorovod {'
  echo 'int Long(int x) {'
  echo '  // { an unbalanced brace in a comment'
  echo '  const char* s = "}}"; char c = '"'"'{'"'"'; (void)s; (void)c;'
  for _ in $(seq "$1"); do echo '  x += 1;'; done
  echo '  return x;'
  echo '}'
  echo '}  // namespace khorovod'
}

expect "the tree passes" "$(check "$root")" 0

fresh; cpp_function 90 > "$tmp/tree/runtime/src/common/long.cc"
expect "a 95-line function passes" "$(check "$tmp/tree")" 0

fresh; cpp_function 96 > "$tmp/tree/runtime/src/common/long.cc"
expect "a 101-line function fails" "$(check "$tmp/tree")" 1
expect "the function is named" "$(grep -c 'runtime/src/common/long.cc:2: function Long has 101 lines' "$tmp/out")" 1

fresh; { echo 'def long():'; for _ in $(seq 101); do echo '    pass'; done; } > "$tmp/tree/python/khorovod/long.py"
expect "a long Python function fails" "$(check "$tmp/tree")" 1
expect "the Python function is named" "$(grep -c 'python/khorovod/long.py:1: function long has 102 lines' "$tmp/out")" 1

fresh; for _ in $(seq 501); do echo '// filler'; done > "$tmp/tree/runtime/src/common/big.h"
expect "a 501-line file fails" "$(check "$tmp/tree")" 1
expect "the file is named" "$(grep -c 'runtime/src/common/big.h: 501 lines' "$tmp/out")" 1

finish check_sizes
