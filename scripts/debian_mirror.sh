# Sourced by scripts/setup.sh and bench/build_llamacpp.sh: debian_mirror prints the URI of the
# Debian archive this machine's apt already uses (the first source, in deb822 .sources files or
# one-line sources.list entries, that serves a release suite such as bookworm or
# bookworm-updates rather than security updates), so that the sources these scripts add
# (bookworm-backports; trixie's glslc for the llama.cpp peer) come from the same mirror. No
# mirror is named here: a machine with its own mirror works, and one with none configured gets
# a clear error. An argument is a root to read etc/apt under instead of / (for a check).
debian_mirror() {
  local f uri r=${1:-}
  uri=$(
    for f in "$r"/etc/apt/sources.list.d/*.sources; do
      [ -r "$f" ] || continue
      # deb822: a stanza's URIs and Suites (blank lines separate stanzas)
      awk 'function flush() { if (uris != "" && suites ~ /(^| )[a-z]+(-updates)?( |$)/ && types ~ /(^| )deb( |$)/) { split(uris, u, " "); print u[1] } uris = ""; suites = ""; types = "" }
           /^[ \t]*$/ { flush(); next }
           /^Types:/ { sub(/^Types:[ \t]*/, ""); types = $0 }
           /^URIs:/ { sub(/^URIs:[ \t]*/, ""); uris = $0 }
           /^Suites:/ { sub(/^Suites:[ \t]*/, ""); suites = $0 }
           END { flush() }' "$f"
    done
    for f in "$r"/etc/apt/sources.list "$r"/etc/apt/sources.list.d/*.list; do
      [ -r "$f" ] || continue
      # one-line form: deb [options] URI SUITE COMPONENTS...
      sed -e 's/#.*//' -e 's/\[[^]]*\]//' "$f" | awk '$1 == "deb" && $3 ~ /^[a-z]+(-updates)?$/ { print $2 }'
    done
  )
  uri=$(printf '%s\n' "$uri" | grep -v -- '-security' | grep -m1 . || true)
  if [ -z "$uri" ]; then
    echo "no Debian archive found in this machine's apt sources (/etc/apt/sources.list, /etc/apt/sources.list.d):" \
         "configure one (e.g. with the Debian installer) and run again" >&2
    return 1
  fi
  printf '%s\n' "${uri%/}"
}
