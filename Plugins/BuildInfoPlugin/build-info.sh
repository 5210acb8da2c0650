#!/bin/sh
# The version of a build of this repository, by one rule (semantic versioning):
# - HEAD is a release (a tag vX.Y.Z on it, or its commit listed in RELEASES): X.Y.Z;
# - otherwise the patch after the last release in RELEASES, marked as a development build of its commit:
#   0.1.1-dev+3f2a9c1b0d4e.
# SYNCHEALTH_BUILD_VERSION and SYNCHEALTH_BUILD_COMMIT replace what git would say (a build without .git).
#
#   build-info.sh PACKAGE_DIR              prints "VERSION COMMIT"
#   build-info.sh PACKAGE_DIR SWIFT_FILE   writes the Swift constants, touching the file only when they change
set -eu
package=$1
commit=${SYNCHEALTH_BUILD_COMMIT:-$(git -C "$package" rev-parse HEAD 2>/dev/null || echo unknown)}
version=${SYNCHEALTH_BUILD_VERSION:-}
if [ -z "$version" ]; then
  tag=$(git -C "$package" tag --points-at HEAD --list 'v[0-9]*' 2>/dev/null | head -n 1)
  listed=$(awk -v c="$commit" '$1 !~ /^#/ && $2 == c { print $1; exit }' "$package/RELEASES" 2>/dev/null || true)
  if [ -n "$tag" ]; then
    version=${tag#v}
  elif [ -n "$listed" ]; then
    version=$listed
  else
    last=$(awk '$1 !~ /^#/ && NF >= 2 { v = $1 } END { print v }' "$package/RELEASES" 2>/dev/null || true)
    next=$(echo "${last:-0.0.0}" | awk -F. '{ printf "%d.%d.%d", $1, $2, $3 + 1 }')
    version="$next-dev+$(echo "$commit" | cut -c1-12)"
  fi
fi
# Both go into a Swift literal, a header and HTML as they are: nothing but semantic versioning's characters.
case "$version$commit" in
  *[!0-9A-Za-z.+-]*) echo "build-info: refusing version '$version' or commit '$commit'" >&2; exit 1 ;;
esac
if [ $# -lt 2 ]; then
  echo "$version $commit"
  exit 0
fi
file=$2
mkdir -p "$(dirname "$file")"
printf '// Written by Plugins/BuildInfoPlugin/build-info.sh before every build.\nlet generatedVersion = "%s"\nlet generatedCommit = "%s"\n' \
  "$version" "$commit" > "$file.new"
if cmp -s "$file.new" "$file"; then rm "$file.new"; else mv "$file.new" "$file"; fi
