#!/usr/bin/env bash
# The main job: installs dependencies, builds, and trains the example model
# across 4 local worker processes with khorovodrun. Extra arguments go to the
# trainer (e.g. --steps 500).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh" release -DCMAKE_BUILD_TYPE=Release -DKHOROVOD_BUILD_TESTS=OFF \
  -- khorovodrun khorovod-example-trainer
bin="$root/build/release/bin"
echo "== khorovodrun -np 4 khorovod-example-trainer $*"
exec "$bin/khorovodrun" -np 4 "$bin/khorovod-example-trainer" "$@"
