#!/bin/sh
# SPDX-License-Identifier: MIT
# Build paddock's .deb from a source tree: copy the project's files (tracked and new,
# not ignored) into OUT/paddock-VERSION, add packaging/deb/debian, run dpkg-buildpackage.
#   packaging/deb/build.sh SRC OUT     -> OUT/paddock_VERSION_ARCH.deb
set -eu

src=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
version=$(dpkg-parsechangelog -l "$src/packaging/deb/debian/changelog" -S Version)
tree="$out/paddock-$version"

rm -rf "$tree"
mkdir -p "$tree"
"$src/packaging/copy-source.sh" "$src" "$tree"
rm -rf "$tree/debian"
cp -a "$src/packaging/deb/debian" "$tree/debian"

cd "$tree"
DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:-parallel=$(nproc)}" \
	dpkg-buildpackage --build=binary --no-sign
ls -1 "$out"/paddock_"$version"_*.deb
