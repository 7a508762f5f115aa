#!/usr/bin/env bash
# The main job: installs dependencies, builds, and trains the example model
# elastically across 4 local worker processes (min 2, max 4). Rank 1 crashes
# on purpose after committing step 100; the survivors re-form the ring,
# khorovodrun starts a replacement, and training resumes from step 100.
# Extra arguments go to the trainer (e.g. --steps 500, --fail-at-step 0).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh" release -DCMAKE_BUILD_TYPE=Release -DKHOROVOD_BUILD_TESTS=OFF \
  -- khorovodrun khorovod-example-trainer khorovod-rendezvous
bin="$root/build/release/bin"
echo "== khorovodrun -np 4 --min-np 2 --max-np 4 khorovod-example-trainer --fail-at-step 100 $*"
exec "$bin/khorovodrun" -np 4 --min-np 2 --max-np 4 "$bin/khorovod-example-trainer" --fail-at-step 100 "$@"
