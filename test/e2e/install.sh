#!/usr/bin/env bash
# Installs what the real-VS-Code suite needs (design.md#tests-in-real-vs-code). Idempotent: each step checks before it acts,
# so `.ci/run` can call it on every run and a warm machine pays only a few seconds.
set -euo pipefail
cd "$(dirname "$0")/../.."

CODE_SERVER_VERSION=4.100.3

missing=()
for p in libkrb5-dev ripgrep chromium; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "e2e install: apt packages ${missing[*]}"
  apt-get -o DPkg::Lock::Timeout=900 update -qq
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -qq "${missing[@]}" >/dev/null
fi

# @vscode/ripgrep's postinstall downloads rg from GitHub, which is unreachable here; it first looks in this
# cache, so Debian's rg packed under the expected name satisfies it.
cache="$(node -p "require('os').tmpdir()")/vscode-ripgrep-cache-1.15.11"
tarball="$cache/ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz"
if [ ! -f "$tarball" ]; then
  mkdir -p "$cache"
  tar czf "$tarball" -C /usr/bin rg
fi

cs=.code-server
if [ ! -x "$cs/node_modules/.bin/code-server" ] || \
   [ "$(node -p "require('./$cs/node_modules/code-server/package.json').version" 2>/dev/null)" != "$CODE_SERVER_VERSION" ]; then
  echo "e2e install: code-server@$CODE_SERVER_VERSION (builds native modules, ~5 min)"
  mkdir -p "$cs"
  [ -f "$cs/package.json" ] || echo '{ "private": true }' > "$cs/package.json"
  (cd "$cs" && npm_config_yes=true npm_config_unsafe_perm=true npm install --no-audit --no-fund --loglevel=error \
    "code-server@$CODE_SERVER_VERSION")
fi

# The suite itself drives Chromium through playwright-core (a devDependency of the project).
if [ ! -d node_modules/playwright-core ]; then
  npm install --no-audit --no-fund --loglevel=error
fi
echo "e2e install: ready (code-server $CODE_SERVER_VERSION, $(/usr/bin/chromium --version 2>/dev/null | head -1))"
