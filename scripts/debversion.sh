#!/bin/sh
# debversion.sh: the Debian version of the checkout, for make deb. A
# Debian version must start with a digit, and git describe gives a tag or a
# bare hash, so:
#   at tag v1.2.0                  -> 1.2.0-1
#   3 commits after v1.2.0         -> 1.2.0+git20261121.3e38169-1
#   no tag                         -> 0.0~git20261121.3e38169-1
# with the commit date (UTC) and its short hash, and "+dirty" added before
# the revision when the tree has changes, so it sorts after the clean build.
set -eu
cd "$(dirname "$0")/.."
date=$(TZ=UTC0 git log -1 --format=%cd --date=format-local:%Y%m%d)
hash=$(git rev-parse --short HEAD)
snap="git$date.$hash"
if tag=$(git describe --tags --abbrev=0 --match 'v[0-9]*' 2>/dev/null); then
	base=${tag#v}
	if [ "$(git rev-list -n 1 "$tag")" = "$(git rev-parse HEAD)" ]; then
		v=$base
	else
		v="$base+$snap"
	fi
else
	v="0.0~$snap"
fi
# Untracked files do not change what the package holds.
if ! git diff --quiet HEAD -- 2>/dev/null; then
	v="$v+dirty"
fi
echo "$v-1"
