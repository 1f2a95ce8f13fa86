#!/usr/bin/env bash
# Stop the cluster started by start.sh (radosgw, then the OSD, then the
# monitor) by the pids in its own pid files, and remove its state directory.
# Usage: .ci/radosgw/stop.sh [STATE_DIR]     (default /tmp/rcpt-radosgw)
set -uo pipefail

D=${1:-${RCPT_RADOSGW_DIR:-/tmp/rcpt-radosgw}}
[ -d "$D" ] || exit 0
for name in client.rgw.rcpt osd.0 mon.a; do
  pidfile="$D/run/$name.pid"
  [ -s "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  kill "$pid" 2>/dev/null || continue
  for _ in $(seq 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
done
# Only remove a directory that start.sh made.
if [ -f "$D/ceph.conf" ] && [ -d "$D/run" ]; then
  rm -rf "$D"
fi
echo "radosgw/stop: stopped"
