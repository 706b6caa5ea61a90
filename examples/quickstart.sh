#!/usr/bin/env bash
# cce-knowledge quickstart: the whole pipeline on the embedded example docs tree.
#
#   examples/quickstart.sh [OUT_DIR]        (default OUT_DIR: ./cce-quickstart)
#
# Installs the package (skip with CCE_QUICKSTART_SKIP_INSTALL=1) into the active
# virtual environment, or, with none active, into a venv of its own under OUT_DIR
# (never a global site-packages), then:
# extract a docs tree -> validate -> index with its manifest -> push --dry-run ->
# push to a local bare cache repo (file://, git-lfs on) -> pull into a fresh
# consumer directory -> status -> search -> the ask suite as a gate -> doctor.
# Everything it writes stays under OUT_DIR (its own CCE_HOME included), and a
# re-run reuses the cache repo: the second push is an unchanged re-publish.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
OUT="${1:-$PWD/cce-quickstart}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
PY="${PYTHON:-python3}"
CORPUS="acme-docs"
URL_BASE="https://git.acme.example/checkout-docs/blob"

export CCE_HOME="$OUT/cce-home"
export GIT_TERMINAL_PROMPT=0
unset CCE_SYNC_TOKEN GITHUB_TOKEN || true

step=0
step() {
  step=$((step + 1))
  printf '\n== %d. %s\n' "$step" "$1"
}
run() {
  printf '$'
  printf ' %q' "$@"
  printf '\n'
  "$@"
}

# The cache keeps .cck artifacts in git-LFS, and push refuses without it.
if ! git lfs version >/dev/null 2>&1; then
  echo "error: git-lfs is not installed; the quickstart publishes to a cache that stores" >&2
  echo "  .cck artifacts in git-LFS. Install it (https://git-lfs.com; e.g." >&2
  echo "  apt-get install git-lfs, or brew install git-lfs) and run this again." >&2
  exit 1
fi

# Where to install: the active virtual environment when there is one; otherwise always
# a venv of its own under OUT_DIR — never a global site-packages (pyenv's, conda's, a
# python.org or distribution Python's; the last refuse anyway, PEP 668).
in_venv_with_pip() {
  "$PY" -c 'import sys; sys.exit(0 if sys.prefix != sys.base_prefix else 1)' &&
    "$PY" -m pip --version >/dev/null 2>&1
}

step "install cce-knowledge"
if [ "${CCE_QUICKSTART_SKIP_INSTALL:-0}" = "1" ]; then
  echo "skipped (CCE_QUICKSTART_SKIP_INSTALL=1)"
elif in_venv_with_pip; then
  echo "installing into the active virtual environment, $("$PY" -c 'import sys; print(sys.prefix)')"
  run "$PY" -m pip install -q -e "$REPO"
else
  echo "no virtual environment is active for $PY: installing into a venv of its own,"
  echo "$OUT/venv (never into that Python's global site-packages)"
  [ -x "$OUT/venv/bin/python" ] || run "$PY" -m venv "$OUT/venv"
  PY="$OUT/venv/bin/python"
  export PATH="$OUT/venv/bin:$PATH"
  # A plain install: this venv is the quickstart's own, nobody edits through it.
  run "$PY" -m pip install -q "$REPO"
fi
command -v cce >/dev/null || { echo "error: \`cce\` is not on PATH after install" >&2; exit 1; }
run cce --version

step "put the example docs tree in a git repo (updated_at comes from commits)"
# Fixed authors and dates make the commits — and so the feed bytes — reproducible.
DOCS="$OUT/docs-repo"
rm -rf "$DOCS"
mkdir -p "$DOCS"
cp -R "$HERE/docs/." "$DOCS/"
# (Identity through the environment: it wins over any GIT_AUTHOR_*/GIT_COMMITTER_* the
# caller has set, which `-c user.name=` would not.)
git_c() {
  GIT_AUTHOR_DATE="$1" GIT_COMMITTER_DATE="$1" \
    GIT_AUTHOR_NAME="Acme Docs" GIT_AUTHOR_EMAIL="docs@acme.example" \
    GIT_COMMITTER_NAME="Acme Docs" GIT_COMMITTER_EMAIL="docs@acme.example" \
    git -C "$DOCS" -c commit.gpgsign=false commit -q -m "$2"
}
git -C "$DOCS" init -q
git -C "$DOCS" symbolic-ref HEAD refs/heads/main
git -C "$DOCS" add README.md policies
git_c "2026-01-15T09:00:00Z" "Policies: password hashing, data retention, secrets"
git -C "$DOCS" add adr design
git_c "2026-02-03T14:30:00Z" "ADRs 0001-0003 and the rate limiting design note"
git -C "$DOCS" add runbooks
git_c "2026-02-20T08:15:00Z" "Runbooks: gateway outage, credential rotation"
git -C "$DOCS" add epics
git_c "2026-03-10T16:45:00Z" "Epic: Checkout v2"
git -C "$DOCS" log --format='  %h %cI %s'

step "extract the docs tree into a cce.knowledge/v1 feed (+ manifest)"
run cce knowledge extract docs --root "$DOCS" --url-base "$URL_BASE" \
  --out "$OUT/feed.jsonl" --manifest "$OUT/feed.manifest.json"
if cmp -s "$OUT/feed.jsonl" "$HERE/feed.jsonl"; then
  echo "feed is byte-identical to the committed examples/feed.jsonl"
else
  echo "note: feed differs from the committed examples/feed.jsonl (adapter changed?)"
fi

step "validate the feed against its manifest"
if cce knowledge validate --help >/dev/null 2>&1; then
  run cce knowledge validate "$OUT/feed.jsonl" --manifest "$OUT/feed.manifest.json"
else
  echo "(no \`cce knowledge validate\` in this build; \`index --manifest\` verifies instead)"
fi

step "index the feed into the producer's store (redaction happens here)"
rm -rf "$OUT/producer"
run cce knowledge index "$OUT/feed.jsonl" --dir "$OUT/producer" --manifest "$OUT/feed.manifest.json"
if grep -q 's3cr3tK3yF0rD3m0Only' "$OUT/producer/.cce/knowledge/"*.json; then
  echo "error: the example secret reached the store" >&2
  exit 1
fi
echo "the example api_key in policies/secrets-handling.md is stored as:"
grep -o 'api_key = \[REDACTED:[A-Z_]*\]' "$OUT/producer/.cce/knowledge/"*.json | head -1 | sed 's/^/  /'

step "create the local cache repository (a bare git repo, LFS for .cck)"
CACHE="$OUT/cache.git"
if [ ! -d "$CACHE" ]; then
  run git init -q --bare "$CACHE"
  git -C "$CACHE" symbolic-ref HEAD refs/heads/main
else
  echo "reusing $CACHE"
fi
REMOTE="file://$CACHE"

step "push --dry-run: what would change on the remote"
run cce knowledge push --corpus "$CORPUS" --remote "$REMOTE" --dir "$OUT/producer" --dry-run

step "push: publish the corpus"
run cce knowledge push --corpus "$CORPUS" --remote "$REMOTE" --dir "$OUT/producer"

step "pull into a fresh consumer directory"
rm -rf "$OUT/consumer"
mkdir -p "$OUT/consumer"
run cce knowledge pull --corpus "$CORPUS" --remote "$REMOTE" --dir "$OUT/consumer"

step "status: what is installed, from where, how fresh"
run cce knowledge status --dir "$OUT/consumer" --remote "$REMOTE"

step "ask a question"
run cce knowledge search "how are customer passwords hashed" --dir "$OUT/consumer" -k 3

step "gate: the example ask suite must be proven from the pulled corpus"
run cce knowledge ask "$HERE/ask.jsonl" --dir "$OUT/consumer"

step "doctor"
run cce doctor --dir "$OUT/consumer"

printf '\nDone. Serve the pulled corpus to an agent with:\n  cce mcp --dir %s\n' "$OUT/consumer"
