#!/usr/bin/env bash
# Checks that every relative link in README.md, CHANGELOG.md and docs/ names a file that exists
# and, with a #fragment, a heading of that file (GitHub's slugs: lower case, punctuation dropped,
# spaces to hyphens). Prints each broken link; exits non-zero if there is one.
set -uo pipefail
cd "$(dirname "$0")/.."
broken=0
for file in README.md CHANGELOG.md docs/*.md docs/*/*.md; do
  [ -e "$file" ] || continue
  dir=$(dirname "$file")
  while read -r link; do
    case "$link" in http*|mailto*) continue ;; esac
    path="${link%%#*}"
    anchor=""
    [[ "$link" == *#* ]] && anchor="${link#*#}"
    target="$dir/$path"
    [ -z "$path" ] && target="$file"
    if [ ! -e "$target" ]; then
      echo "$file: no file for $link"; broken=1; continue
    fi
    if [ -n "$anchor" ]; then
      grep -E '^#+ ' "$target" | sed -E 's/^#+ //' | tr 'A-Z' 'a-z' \
        | sed -E 's/[^a-z0-9 _-]//g; s/ /-/g' | grep -qx -- "$anchor" \
        || { echo "$file: no heading for $link"; broken=1; }
    fi
  done < <(grep -oE '\]\([^)]*\)' "$file" | sed -E 's/^\]\(//; s/\)$//')
done
exit $broken
