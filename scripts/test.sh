#!/usr/bin/env bash
# Set up and run the default test suite (slow and GPU tests are excluded; run them with -m slow / -m gpu).
set -euo pipefail
cd "$(dirname "$0")/.."
# The code verifier's sandbox uses bubblewrap; without it the sandbox tests skip and code runs fall back to a
# weak sandbox with a loud warning. Install it when we can (root with apt).
if ! command -v bwrap >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null || \
    echo "warning: could not install bubblewrap; sandbox tests will skip" >&2
fi
# The dafny environment verifies programs with Debian's Dafny 2.3 (mono and z3 come with it); without it the
# Dafny tests that run the verifier skip.
if ! command -v dafny >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dafny >/dev/null 2>&1 || \
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dafny >/dev/null) || \
    echo "warning: could not install dafny; the Dafny verifier tests will skip" >&2
fi
# The comparison report's browser test renders it in headless Chromium (about 30 s to install with apt);
# without a browser that test skips.
if ! command -v chromium >/dev/null 2>&1 && ! command -v google-chrome >/dev/null 2>&1 && [ "$(id -u)" = 0 ] \
    && command -v apt-get >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1 || \
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || \
    echo "warning: could not install chromium; the report browser test will skip" >&2
fi
bash scripts/setup.sh dev
. .venv/bin/activate
exec python -m pytest -q "$@"
