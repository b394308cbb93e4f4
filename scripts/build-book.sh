#!/usr/bin/env bash
# Builds the book (docs/, mdBook) into docs/book, and fails on any error, on any warning mdBook prints, and on
# any relative link that does not resolve: in the chapters (docs/src) and in README.md, a link's file must exist
# and its #anchor must be an id of the page mdBook built for it.
#
# mdBook is installed from crates.io into target/tools when it is missing or another version
# (`cargo install mdbook --version 0.5.4 --locked --root target/tools`: a few minutes on two cores, once).
set -euo pipefail
cd "$(dirname "$0")/.."

MDBOOK_VERSION=0.5.4
TOOLS="${CARGO_TARGET_DIR:-$PWD/target}/tools"
MDBOOK="$TOOLS/bin/mdbook"

if [ ! -x "$MDBOOK" ] || [ "$("$MDBOOK" --version 2>/dev/null)" != "mdbook v$MDBOOK_VERSION" ]; then
  echo "build-book: installing mdbook $MDBOOK_VERSION into $TOOLS"
  cargo install mdbook --version "$MDBOOK_VERSION" --locked --root "$TOOLS"
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
