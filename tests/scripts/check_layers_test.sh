#!/usr/bin/env bash
# scripts/check_layers.py: passes on the tree, and fails on a copy of it with
# an upward include, a Python module importing a framework binding, a new
# Python cycle, or a known debt that is gone (so the debt list only shrinks).
source "$(dirname "$0")/expect.sh"
check() { python3 "$root/scripts/check_layers.py" "$1" > "$tmp/out" 2>&1; echo $?; }
fresh() {
  rm -rf "$tmp/tree"; mkdir -p "$tmp/tree"
  cp -r "$root/runtime" "$root/operator" "$root/python" "$tmp/tree/"
}

expect "the tree passes" "$(check "$root")" 0

fresh; echo '#include "core/message.h"' >> "$tmp/tree/runtime/src/common/enforce.h"
expect "common including core fails" "$(check "$tmp/tree")" 1
expect "the upward include is named" "$(grep -c 'runtime/src/common/enforce.h: includes "core/message.h"' "$tmp/out")" 1

fresh; echo 'from .torch import mpi_ops' >> "$tmp/tree/python/khorovod/basics.py"
expect "the framework-free package importing torch fails" "$(check "$tmp/tree")" 1
expect "the framework import is named" \
  "$(grep -c 'khorovod.basics imports the framework binding khorovod.torch.mpi_ops' "$tmp/out")" 1

fresh; echo 'from . import optimizer' >> "$tmp/tree/python/khorovod/torch/compression.py"
expect "a new Python cycle fails" "$(check "$tmp/tree")" 1
expect "the cycle is named" "$(grep -c 'khorovod.torch.compression and khorovod.torch.optimizer import each other' "$tmp/out")" 1

# The debt list (empty today): a listed break is tolerated, a listed break
# that no longer occurs fails. A copy of the script gets one entry.
sed 's#^KNOWN = {}$#KNOWN = {("runtime/src/common", "runtime/src/core"): "a test debt"}#' \
  "$root/scripts/check_layers.py" > "$tmp/check_layers.py"
listed() { python3 "$tmp/check_layers.py" "$1" > "$tmp/out" 2>&1; echo $?; }
fresh; echo '#include "core/message.h"' >> "$tmp/tree/runtime/src/common/enforce.h"
expect "a listed debt is tolerated" "$(listed "$tmp/tree")" 0
fresh
expect "a fixed debt still listed fails" "$(listed "$tmp/tree")" 1
expect "the fixed debt is named" "$(grep -c 'remove it from KNOWN: runtime/src/common -> runtime/src/core' "$tmp/out")" 1

finish check_layers
