#!/bin/sh
# Regenerate the Python code of the wire protocol from src/tether/_wire/tether.proto.
# Usage: scripts/gen_proto.sh [OUTDIR]   (default: src; tests pass a temp dir to compare)
# Needs grpcio-tools (in the `test` extra). Run from the repository root.
set -eu
out="${1:-src}"
python -m grpc_tools.protoc -I src --python_out="$out" --pyi_out="$out" \
    --grpc_python_out="$out" src/tether/_wire/tether.proto
