#!/usr/bin/env bash
# Install Ceph's radosgw, a monitor and an OSD from Debian's packages, for the
# S3 tests (start.sh runs them on 127.0.0.1). Needs root and apt. Does nothing
# when the programs are already there. See spec/storage.md "Testing on radosgw".
set -euo pipefail

need=(radosgw ceph-mon ceph-osd ceph radosgw-admin ceph-authtool monmaptool curl)
missing=0
for program in "${need[@]}"; do
  command -v "$program" >/dev/null 2>&1 || missing=1
done
if [ "$missing" = 0 ]; then
  echo "radosgw/install: already installed ($(ceph --version | cut -d' ' -f1-3))"
  exit 0
fi

if [ "$(id -u)" != 0 ]; then
  echo "radosgw/install: root is needed to install radosgw ceph-mon ceph-osd ceph-common" >&2
  exit 1
fi
start=$(date +%s)
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends radosgw ceph-mon ceph-osd ceph-common curl >/dev/null
echo "radosgw/install: $(ceph --version | cut -d' ' -f1-3) installed in $(( $(date +%s) - start )) s"
