#!/usr/bin/env bash
# Services that enable sheafalloc's `control` feature get the sidecar, not
# the command-line client: clap, clap_complete and ureq (sheafctl's and the
# client module's dependencies, behind sheafalloc-control's `cli` and
# `client` features) must not be in their dependency tree.
set -euo pipefail
cd "$(dirname "$0")/.."
tree=$(cargo tree -q -p sheafalloc --features control -e normal --prefix none)
grep -q '^sheafalloc-control ' <<<"$tree" || { echo "check-control-deps: the control feature no longer brings the sidecar" >&2; exit 1; }
if stray=$(grep -E '^(clap|clap_complete|ureq) ' <<<"$tree"); then
  echo "check-control-deps: sheafalloc with \`control\` builds the CLI's dependencies:" >&2
  echo "$stray" >&2
  exit 1
fi
