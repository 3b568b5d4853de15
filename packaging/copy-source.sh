#!/bin/sh
# SPDX-License-Identifier: MIT
# Copy the project's files (tracked and new, not ignored; without git, everything but
# the build trees) from SRC into DEST, for the package builds.
#   packaging/copy-source.sh SRC DEST
set -eu

src=$1
dest=$2
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
	git -C "$src" ls-files -z --cached --others --exclude-standard
else
	(cd "$src" && find . -path ./build -prune -o -path './build-*' -prune -o \
		-path ./.git -prune -o -type f -print0)
fi | (cd "$src" && xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh) |
	(cd "$src" && tar --null -T - -cf -) | tar -C "$dest" -xf -
