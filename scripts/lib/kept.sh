# Installs kept across clones on one machine, sourced by the setup scripts. An install is kept
# under $TASKGATE_KEPT (default ~/.cache/taskgate-kept) in a directory named after what it was
# made from (its pinned inputs and tool versions), so a new clone links to it instead of
# installing again; other inputs get a directory of their own. Delete the directory to
# force a fresh install everywhere. Only directories that keep working when moved are kept
# (node_modules, a cargo target dir), not Python venvs, whose scripts name their own path.

KEPT_ROOT="${TASKGATE_KEPT:-${XDG_CACHE_HOME:-$HOME/.cache}/taskgate-kept}"

# kept_dir NAME WANT: where the install NAME made from WANT is kept.
kept_dir() {
  printf '%s/%s-%s' "$KEPT_ROOT" "$1" "$(printf '%s' "$2" | sha256sum | cut -c1-16)"
}

# link_kept PATH KEPT: makes PATH a link to KEPT's copy when one was kept whole; else fails.
link_kept() {
  [ -f "$2/.complete" ] || return 1
  rm -rf "$1" && ln -s "$2/$(basename "$1")" "$1"
}

# keep PATH KEPT: moves the install at PATH (just made and checked) to KEPT and links PATH to
# it. When another clone kept the same install meanwhile, its copy is used and this one
# dropped. Keeping only saves later installs: when it cannot be done, PATH stays as it was.
keep() {
  local tmp="$2.new.$$" leaf
  leaf="$(basename "$1")"
  mkdir -p "$tmp" && mv "$1" "$tmp/" || {
    rm -rf "$tmp"
    return 0
  }
  touch "$tmp/.complete"
  if { mv -T "$tmp" "$2" 2>/dev/null || [ -f "$2/.complete" ]; } && link_kept "$1" "$2"; then
    rm -rf "$tmp"
    return 0
  fi
  [ -e "$tmp/$leaf" ] && [ ! -e "$1" ] && mv "$tmp/$leaf" "$1"
  rm -rf "$tmp"
}
