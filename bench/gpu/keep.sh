#!/usr/bin/env bash
# Files the logs of one GPU session into the repository, so that every GPU
# figure in the docs can cite the log it came from:
#
#   bench/gpu/keep.sh DIR      # DIR holds session.log (and logs.tgz) from session.sh
#
# copies them to bench/gpu/results/<date>-<device>/, the date and device read
# from the first lines session.sh writes. Refuses to overwrite a kept session.
set -euo pipefail
src=${1:?usage: bench/gpu/keep.sh DIR (the session.log and logs.tgz of bench/gpu/session.sh)}
log=$src/session.log
[ -f "$log" ] || { echo "keep.sh: no session.log in $src" >&2; exit 2; }
date=$(sed -n 's/^date: \([0-9-]*\)T.*/\1/p' "$log" | head -n 1)
device=$(sed -n 's/^device: //p' "$log" | head -n 1)
[ -n "$date" ] || { echo "keep.sh: $log has no 'date:' line (from an older session.sh?)" >&2; exit 2; }
[ -n "$device" ] || device=unknown-device
slug=$(printf '%s' "$device" | tr '[:upper:]' '[:lower:]' | tr -cs 'a-z0-9' '-' | sed 's/^-//; s/-$//')
here=$(cd "$(dirname "$0")" && pwd)
dest=$here/results/$date-$slug
n=1
while [ -e "$dest" ]; do n=$((n + 1)); dest=$here/results/$date-$slug-$n; done
mkdir -p "$dest"
cp "$log" "$dest/"
[ -f "$src/logs.tgz" ] && cp "$src/logs.tgz" "$dest/"
echo "kept in $dest: commit it, and cite it beside the figures it holds"
