#!/usr/bin/env bash
# End to end: horovodrun's --output-filename layout, --hostfile slots and the
# elastic host blacklist with --blacklist-cooldown-range, through the real
# khorovodrun with /bin/sh workers. Usage: khorovodrun_horovod_flags_test.sh KHOROVODRUN
set -uo pipefail
run=$1
work=$(mktemp -d /tmp/khorovod-hvdflags.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# 1. --output-filename: DIR/rank.<padded>/stdout|stderr, and still on the terminal.
timeout 60 "$run" -np 11 --output-filename "$work/out" /bin/sh -c 'echo "o$HOROVOD_RANK"; echo "e$HOROVOD_RANK" >&2' \
  > "$work/term" 2>/dev/null || fail "output-filename run"
[ "$(ls "$work/out" | head -2 | tr '\n' ' ')" = "rank.00 rank.01 " ] || fail "layout: $(ls "$work/out")"
[ "$(cat "$work/out/rank.07/stdout")" = o7 ] || fail "rank.07/stdout"
[ "$(cat "$work/out/rank.10/stderr")" = e10 ] || fail "rank.10/stderr"
grep -q '^\[7\]<stdout>:o7$' "$work/term" || fail "terminal copy"

# 2. --hostfile: slots add up; too few slots is refused.
printf 'localhost slots=2\n127.0.0.1 slots=1\n' > "$work/hosts"
timeout 60 "$run" -np 3 --hostfile "$work/hosts" /bin/true || fail "hostfile with 3 slots"
timeout 60 "$run" -np 4 --hostfile "$work/hosts" /bin/true 2> "$work/err" && fail "hostfile: 4 workers on 3 slots"
grep -q "offers 3 slots" "$work/err" || fail "hostfile message: $(cat "$work/err")"

# 3. Blacklist cooldown: the first worker on host-a fails; host-a is out for
#    1..2 s, its slot is filled again after the cooldown, and the job ends 0.
cat > "$work/worker.sh" <<'SH'
if [ "$HOROVOD_HOSTNAME" = host-a ] && mkdir "$MARK" 2>/dev/null; then exit 3; fi
echo "up on $HOROVOD_HOSTNAME"; sleep 4
SH
MARK=$work/failed timeout 60 "$run" -np 2 --min-np 1 --max-np 2 --run-hosts-locally -H host-a:1,host-b:1 \
  --blacklist-cooldown-range 1 2 -x MARK /bin/sh "$work/worker.sh" > "$work/bl.out" 2> "$work/bl.err"
rc=$?
grep -q "host host-a blacklisted for [0-9]* ms (--blacklist-cooldown-range)" "$work/bl.err" || fail "no blacklist: $(cat "$work/bl.err")"
grep -q "up on host-a" "$work/bl.out" || fail "host-a never came back: $(cat "$work/bl.out" "$work/bl.err")"
[ $rc = 0 ] || fail "blacklist job rc=$rc: $(cat "$work/bl.err")"
echo "PASS: output-filename layout, hostfile slots, blacklist cooldown"
