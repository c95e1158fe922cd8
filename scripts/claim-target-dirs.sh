# Sourced, not run: claim_target_dirs DIR... before building into target directories that are
# shared between checkouts (the caches under ~/.cache/greenpipe).
#
# Such a directory holds the workspace crates of whichever checkout built last, under the same
# file names for every checkout, and cargo decides freshness by comparing mtimes. A checkout
# whose files are older than that build (one that was built before, then another clone was)
# would reuse the other checkout's test binaries, which embed that checkout's paths
# (env!("CARGO_MANIFEST_DIR"): 2026-12-07, an offline unit test read a deleted clone's src/).
# So when the last checkout to claim a directory was another one, this one's tracked files are
# touched once, before any build: its workspace crates rebuild, as a fresh clone's do.
claim_target_dirs() {
  local dir stale=0
  for dir in "$@"; do
    [[ "$(cat "$dir/.greenpipe-checkout" 2>/dev/null)" == "$PWD" ]] || stale=1
  done
  ((stale)) || return 0
  { git ls-files -z 2>/dev/null || find . -name .git -prune -o -type f -print0; } |
    xargs -0 -r touch -c
  for dir in "$@"; do
    mkdir -p "$dir"
    echo "$PWD" >"$dir/.greenpipe-checkout"
  done
}
