#!/bin/sh
# Builds `asof` for Python into target/python-venv (pip install ./python, with maturin) and runs
# its pytest suite. The build uses cargo's dev profile, sharing the workspace's debug build; a
# user's `pip install ./python` builds the release profile.
set -e
here=$(cd "$(dirname "$0")" && pwd)
python=$(sh "$here/../tests/python/setup.sh")
MATURIN_PEP517_ARGS="--profile dev" "$python" -m pip install --quiet --disable-pip-version-check "$here[test]"
cd "$here" && "$python" -m pytest -q tests
