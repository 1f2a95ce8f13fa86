#!/usr/bin/env bash
# Start a throw-away single-node Ceph cluster on 127.0.0.1 for the S3 tests:
# one monitor, one memstore OSD (in memory: no disk, data gone on stop) and
# radosgw, with cephx on; then an S3 user and an empty bucket.
#
# Usage: .ci/radosgw/start.sh [STATE_DIR]     (default /tmp/rcpt-radosgw)
#
# Writes STATE_DIR/env, to be sourced by the tests and by .ci/run:
#   RCPT_S3_ENDPOINT RCPT_S3_BUCKET AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION
# Ports: RCPT_RADOSGW_PORT (S3, default 40480), RCPT_CEPH_MON_PORT (default 40300).
# Stop with .ci/radosgw/stop.sh STATE_DIR. See spec/storage.md "Testing on radosgw".
set -euo pipefail

D=${1:-${RCPT_RADOSGW_DIR:-/tmp/rcpt-radosgw}}
RGW_PORT=${RCPT_RADOSGW_PORT:-40480}
MON_PORT=${RCPT_CEPH_MON_PORT:-40300}
BUCKET=${RCPT_S3_BUCKET:-rcpt-test}
REGION=us-east-1
ENDPOINT="http://127.0.0.1:${RGW_PORT}"
READY_TRIES=240 # half-second polls: two minutes at most for each daemon

fail() {
  echo "radosgw/start: $*" >&2
  echo "radosgw/start: logs are in $D/log/" >&2
  exit 1
}

for program in ceph-mon ceph-osd radosgw ceph radosgw-admin ceph-authtool monmaptool curl; do
  command -v "$program" >/dev/null 2>&1 || fail "$program not found: run .ci/radosgw/install.sh first"
done

# Refuse to clobber a running cluster: stop it first.
for name in client.rgw.rcpt osd.0 mon.a; do
  pidfile="$D/run/$name.pid"
  if [ -s "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    fail "$name is already running from $D (pid $(cat "$pidfile")): run .ci/radosgw/stop.sh $D"
  fi
done
if curl -s -o /dev/null --max-time 2 "$ENDPOINT/"; then
  fail "something already answers on $ENDPOINT: set RCPT_RADOSGW_PORT to a free port"
fi

t0=$(date +%s%N)
rm -rf "$D"
mkdir -p "$D"/{mon,osd,run,log,rgw}
D=$(cd "$D" && pwd)
FSID=$(cat /proc/sys/kernel/random/uuid)

# Settings that matter on one node (each was needed, see spec/storage.md):
# cephx on (radosgw does not work with auth none); every address 127.0.0.1;
# pool size 1 with failure domain "osd" (chooseleaf type 0); memstore.
cat >"$D/ceph.conf" <<CONF
[global]
fsid = $FSID
mon host = v2:127.0.0.1:$MON_PORT
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind ipv6 = false
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
auth allow insecure global id reclaim = false
run dir = $D/run
admin socket = $D/run/\$name.asok
pid file = $D/run/\$name.pid
log file = $D/log/\$name.log
keyring = $D/keyring
mon data = $D/mon/\$name
mon data avail warn = 5
mon allow pool size one = true
mon allow pool delete = true
mon max pg per osd = 1000
mon warn on pool no redundancy = false
osd data = $D/osd/\$name
osd objectstore = memstore
memstore device bytes = 4294967296
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
osd memory target = 1073741824
osd op num shards = 2
osd op num threads per shard = 1
[osd]
keyring = $D/osd/\$name/keyring
[client.rgw.rcpt]
keyring = $D/rgw/keyring
rgw frontends = beast endpoint=127.0.0.1:$RGW_PORT
rgw data = $D/rgw
rgw dns name = localhost
rgw thread pool size = 64
CONF
C=(-c "$D/ceph.conf")

# Monitor.
ceph-authtool --create-keyring "$D/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
ceph-authtool "$D/keyring" --gen-key -n client.admin \
  --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' --cap mds 'allow *' >/dev/null
monmaptool --create --fsid "$FSID" --addv a "[v2:127.0.0.1:$MON_PORT]" "$D/monmap" >/dev/null
ceph-mon "${C[@]}" --mkfs -i a --monmap "$D/monmap" --keyring "$D/keyring"
ceph-mon "${C[@]}" -i a
ceph "${C[@]}" --connect-timeout 60 -s >/dev/null || fail "the monitor did not answer"

# One memstore OSD (--mkfs must not ask the monitor for its configuration).
OSD_UUID=$(cat /proc/sys/kernel/random/uuid)
OSD_ID=$(ceph "${C[@]}" osd new "$OSD_UUID")
[ "$OSD_ID" = 0 ] || fail "expected osd id 0, got $OSD_ID"
mkdir -p "$D/osd/osd.0"
ceph-osd "${C[@]}" -i 0 --no-mon-config --mkfs --mkkey --osd-uuid "$OSD_UUID" >"$D/log/osd-mkfs.out" 2>&1 ||
  fail "ceph-osd --mkfs failed: $(tail -3 "$D/log/osd-mkfs.out")"
ceph "${C[@]}" auth add osd.0 osd 'allow *' mon 'allow profile osd' mgr 'allow profile osd' \
  -i "$D/osd/osd.0/keyring" >/dev/null 2>&1
ceph-osd "${C[@]}" -i 0 2>>"$D/log/osd-start.err"
up=0
for _ in $(seq "$READY_TRIES"); do
  if ceph "${C[@]}" osd stat -f json 2>/dev/null | grep -q '"num_up_osds":1'; then up=1; break; fi
  sleep 0.5
done
[ "$up" = 1 ] || fail "the OSD did not come up"

# radosgw.
ceph "${C[@]}" auth get-or-create client.rgw.rcpt mon 'allow rw' osd 'allow rwx' mgr 'allow rw' \
  -o "$D/rgw/keyring" >/dev/null 2>&1
radosgw "${C[@]}" -n client.rgw.rcpt
up=0
for _ in $(seq "$READY_TRIES"); do
  if curl -s -o /dev/null --max-time 2 "$ENDPOINT/"; then up=1; break; fi
  sleep 0.5
done
[ "$up" = 1 ] || fail "radosgw did not answer on $ENDPOINT"

# An S3 user with fresh random keys, and an empty bucket.
uuid_hex() { local u; u=$(cat /proc/sys/kernel/random/uuid); echo "${u//-/}"; }
ACCESS_KEY=$(uuid_hex)
ACCESS_KEY=${ACCESS_KEY:0:20}
ACCESS_KEY=${ACCESS_KEY^^}
SECRET_KEY=$(uuid_hex)$(uuid_hex)
SECRET_KEY=${SECRET_KEY:0:40}
radosgw-admin "${C[@]}" user create --uid=rcpt --display-name=rcpt \
  --access-key="$ACCESS_KEY" --secret-key="$SECRET_KEY" >/dev/null 2>"$D/log/user-create.err" ||
  fail "radosgw-admin user create failed: $(tail -3 "$D/log/user-create.err")"
curl -sS --fail-with-body -o "$D/log/bucket-create.out" -X PUT \
  -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" \
  --user "$ACCESS_KEY:$SECRET_KEY" --aws-sigv4 "aws:amz:$REGION:s3" "$ENDPOINT/$BUCKET" ||
  fail "creating bucket $BUCKET failed: $(cat "$D/log/bucket-create.out")"

umask 077
cat >"$D/env" <<ENV
export RCPT_S3_ENDPOINT=$ENDPOINT
export RCPT_S3_BUCKET=$BUCKET
export AWS_ACCESS_KEY_ID=$ACCESS_KEY
export AWS_SECRET_ACCESS_KEY=$SECRET_KEY
export AWS_REGION=$REGION
ENV
t1=$(date +%s%N)
ms=$(( (t1 - t0) / 1000000 ))
echo "radosgw/start: $ENDPOINT bucket $BUCKET ready in $((ms / 1000)).$(printf '%03d' $((ms % 1000))) s; source $D/env"
