#!/bin/sh
# SPDX-License-Identifier: MIT
# Build paddock's RPM with rpmbuild: a source tarball of the project's files (tracked and
# new, not ignored), the spec, and on a host without RPM's cmake and systemd macros
# (Debian), stand-ins for them and --nodeps (BuildRequires name RPM packages).
#   packaging/rpm/build.sh SRC OUT     -> OUT/RPMS/<arch>/paddock-VERSION-1.<arch>.rpm
set -eu

src=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
spec="$src/packaging/rpm/paddock.spec"
version=$(sed -n 's/^Version:[[:space:]]*//p' "$spec")

mkdir -p "$out/SOURCES" "$out/SPECS" "$out/BUILD" "$out/RPMS" "$out/SRPMS"
stage="$out/stage/paddock-$version"
rm -rf "$out/stage"
mkdir -p "$stage"
"$src/packaging/copy-source.sh" "$src" "$stage"
tar -C "$out/stage" -czf "$out/SOURCES/paddock-$version.tar.gz" "paddock-$version"
rm -rf "$out/stage"
cp "$src/packaging/systemd/paddock.sysusers" "$out/SOURCES/"

set -- --define "_topdir $out" --define "_smp_build_ncpus $(nproc)"
if [ -z "$(rpm --eval '%{?cmake:1}')" ]; then
	set -- "$@" --load="$src/packaging/rpm/macros.compat" --nodeps
fi
rpmbuild -bb "$@" "$spec"
ls -1 "$out"/RPMS/*/paddock-"$version"-*.rpm
