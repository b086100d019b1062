# Installs kept across clones on one machine, sourced by the setup scripts. An install is kept
# under $TASKGATE_KEPT (default ~/.cache/taskgate-kept) in a directory named after what it was
# made from (its pinned inputs and tool versions), so a new clone links to it instead of
# installing again; other inputs get a directory of their own, and kept directories unused
# for 14 days are removed. Delete the directory to force a fresh install everywhere. Only
# directories that keep working when moved are kept (node_modules, the rmcp server's binary),
# not Python venvs, whose scripts name their own path. Keeping only saves time: without a
# usable directory (no HOME, a relative path, not writable) every clone installs its own.

if [ -n "${TASKGATE_KEPT:-}" ]; then
  KEPT_ROOT="$TASKGATE_KEPT"
elif [ -n "${XDG_CACHE_HOME:-}" ]; then
  KEPT_ROOT="$XDG_CACHE_HOME/taskgate-kept"
elif [ -n "${HOME:-}" ]; then
  KEPT_ROOT="$HOME/.cache/taskgate-kept"
else
  KEPT_ROOT=""
fi
case "$KEPT_ROOT" in /?*) ;; *) KEPT_ROOT="" ;; esac

# kept_dir NAME WANT: where the install NAME made from WANT is kept (empty: nowhere).
kept_dir() {
  [ -n "$KEPT_ROOT" ] || return 0
  printf '%s/%s-%s' "$KEPT_ROOT" "$1" "$(printf '%s' "$2" | sha256sum | cut -c1-16)"
}

# link_kept PATH KEPT STAMP WANT: makes PATH a link to KEPT's copy when one was kept whole and
# its stamp (STAMP, a file inside the copy) still names WANT; else fails. A copy whose stamp
# changed was written through a link (an older setup script, a hand-run npm ci) and is dropped.
link_kept() {
  local copy
  [ -n "$2" ] && [ -f "$2/.complete" ] || return 1
  copy="$2/$(basename "$1")"
  if [ "$(cat "$copy/$3" 2>/dev/null)" != "$4" ]; then
    rm -rf "$2"
    return 1
  fi
  touch "$2" # its last use, for the removal of unused copies
  rm -rf "$1" && ln -s "$copy" "$1"
}

# keep PATH KEPT STAMP WANT: moves the install at PATH (just made, checked and stamped) to KEPT
# and links PATH to it. When another clone kept the same install meanwhile, its copy is used
# and this one dropped. When keeping cannot be done, PATH stays as it was.
keep() {
  local tmp leaf
  [ -n "$2" ] || return 0
  leaf="$(basename "$1")"
  mkdir -p "$(dirname "$2")" 2>/dev/null && tmp="$(mktemp -d "$2.new.XXXXXX" 2>/dev/null)" || return 0
  touch "$tmp/.complete" && mv "$1" "$tmp/" || {
    [ -e "$1" ] || [ ! -e "$tmp/$leaf" ] || mv "$tmp/$leaf" "$1"
    rm -rf "$tmp"
    return 0
  }
  if { mv -T "$tmp" "$2" 2>/dev/null || [ -f "$2/.complete" ]; } && link_kept "$1" "$2" "$3" "$4"; then
    rm -rf "$tmp"
  else
    [ -e "$1" ] || [ ! -e "$tmp/$leaf" ] || mv "$tmp/$leaf" "$1"
    rm -rf "$tmp"
  fi
  # Copies (and leftovers of interrupted keeps) of this install unused for 14 days.
  find "$(dirname "$2")" -mindepth 1 -maxdepth 1 -name "$(basename "$2" | sed 's/-[0-9a-f]*$//')-*" \
    ! -path "$2" -mtime +14 -exec rm -rf {} + 2>/dev/null || true
}
