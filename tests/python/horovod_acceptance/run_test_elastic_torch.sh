#!/usr/bin/env bash
# Horovod's elastic torch tests through khorovodrun: run_test_elastic.sh's
# torch case (see there).
# Usage: run_test_elastic_torch.sh HOROVOD_CHECKOUT [BUILD_DIR] [-- pytest args]
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/run_test_elastic.sh" "${1:-}" torch "${@:2}"
