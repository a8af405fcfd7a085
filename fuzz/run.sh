#!/usr/bin/env bash
# Runs one cargo-fuzz target for a while: fuzz/run.sh TARGET [SECONDS]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
target="${1:?usage: fuzz/run.sh TARGET [SECONDS]}"
secs="${2:-60}"
if [ ! -x "$here/.tools/bin/cargo-fuzz" ]; then
  cargo install cargo-fuzz --locked --root "$here/.tools"
fi
mkdir -p "$here/corpus/$target"
# Seed the corpus with the regression inputs of the test suite.
if [ -d "$here/../tests/data/fuzz/$target" ]; then
  cp -n "$here/../tests/data/fuzz/$target/"* "$here/corpus/$target/" 2>/dev/null || true
fi
cd "$here/.."
# cargo-fuzz asks for nightly features only for sanitizers; without one the stable toolchain works
# when allowed to accept its -Z flags.
RUSTC_BOOTSTRAP=1 "$here/.tools/bin/cargo-fuzz" run --fuzz-dir "$here" --sanitizer none "$target" \
  "$here/corpus/$target" -- -max_total_time="$secs" -print_final_stats=1
