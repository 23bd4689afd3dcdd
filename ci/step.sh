# shellcheck shell=bash
# A quiet command says what it is doing: one line when it starts, then one after 10 s and every 12 s while it runs
# (as the builds' heartbeat does), never a redrawn bar. Its exit status is the command's. The lines go to fd 3 (this
# script's stdout), so a step whose own output is sent to /dev/null still says them.
exec 3>&1
step() {
  local what="$1" pid start t
  shift
  echo "${0##*/}: $what" >&3
  "$@" &
  pid=$!
  start=$SECONDS
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    t=$((SECONDS - start))
    if [ "$t" -ge 10 ] && [ $(((t - 10) % 12)) -eq 0 ]; then echo "  … $what still running (${t} s)" >&3; fi
  done
  wait "$pid"
}
