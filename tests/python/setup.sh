#!/bin/sh
# Installs the Python clients the tests drive (tests/python/requirements.txt) into
# target/python-venv, once; prints the venv's python. Needs python3 and the package registry.
set -e
here=$(cd "$(dirname "$0")" && pwd)
venv="$here/../../target/python-venv"
stamp="$venv/.requirements"
# Tests run at once may all ask: one installs, the others wait for it.
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
if [ ! -x "$venv/bin/python" ] || ! cmp -s "$here/requirements.txt" "$stamp"; then
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt" >&2
    cp "$here/requirements.txt" "$stamp"
fi
echo "$venv/bin/python"
