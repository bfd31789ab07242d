#!/bin/sh
# Regenerates the committed Python stubs from api.proto. Run from the repository root:
#   sh agent/attribution/podresources/generate.sh
# The stubs import as agent.attribution.podresources.api_pb2; the generated files embed the
# protoc and grpcio-tools versions they need at run time (protobuf >= the gencode version,
# grpcio >= the grpcio-tools version), so bump the lower bounds in pyproject.toml after
# regenerating.
set -eu
python="${PYTHON:-.venv/bin/python}"
"$python" -m grpc_tools.protoc -I. \
    --python_out=. --pyi_out=. --grpc_python_out=. \
    agent/attribution/podresources/api.proto
# the .pyi is type information for mypy; bring it to house lint/format (the .py files are
# excluded from ruff in pyproject.toml)
"$(dirname "$python")/ruff" check --quiet --fix-only agent/attribution/podresources/api_pb2.pyi
"$(dirname "$python")/ruff" format --quiet agent/attribution/podresources/api_pb2.pyi
