#!/usr/bin/env bash
# scripts/debian_mirror.sh on made-up apt configurations: the Debian archive's URI is taken from
# the one-line or deb822 sources that serve a release suite (never the security archive, never
# a commented line), and a machine with none gets an error, not a guessed host. Then no script
# of the project names a mirror itself.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/debian_mirror.sh
fail=0
expect() { # expect NAME WANT ROOT
  local got rc ok=1
  got=$(debian_mirror "$3" 2>/dev/null); rc=$?
  if [ "$2" = ERROR ]; then [ $rc != 0 ] && [ -z "$got" ] || ok=0
  else [ "$got" = "$2" ] || ok=0; fi
  if [ $ok = 1 ]; then echo "ok $1"; else echo "FAIL $1: want '$2', got '$got' (rc $rc)"; fail=1; fi
}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/a/etc/apt/sources.list.d" "$T/b/etc/apt/sources.list.d" "$T/c/etc/apt"
cat > "$T/a/etc/apt/sources.list" <<'S'
deb http://security.example/debian-security bookworm-security main
# deb http://commented.example/debian bookworm main
deb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian/ bookworm main contrib
S
expect "one-line sources" http://mirror.example/debian "$T/a"
cat > "$T/b/etc/apt/sources.list.d/debian.sources" <<'S'
Types: deb
URIs: http://local.example/debian-security
Suites: bookworm-security
Components: main

Types: deb deb-src
URIs: https://local.example/debian/ http://second.example/debian
Suites: bookworm bookworm-updates
Components: main
S
cat > "$T/b/etc/apt/sources.list.d/bpo.sources" <<'S'
Types: deb
URIs: http://other.example/debian
Suites: bookworm-backports
S
expect "deb822 sources" https://local.example/debian "$T/b"
expect "no sources" ERROR "$T/c"
if grep -rnE 'https?://[a-z0-9.-]*(debian|ubuntu)[a-z0-9.-]*\.(org|net|com)' scripts bench/*.sh; then
  echo "FAIL a script names a package mirror"; fail=1
else echo "ok no script names a package mirror"; fi
exit $fail
