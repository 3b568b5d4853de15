#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Run each libFuzzer target of a PADDOCK_FUZZ build for a while, one at a time, on
# its committed corpus; or fold what the runs found back into the corpora (merge).
#
#   tests/fuzz/run.sh BUILD_DIR [SECONDS] [TARGET...]     fuzz (default 60 s each)
#   tests/fuzz/run.sh --merge BUILD_DIR [TARGET...]       add new coverage to corpus/
#
# New inputs go to BUILD_DIR/fuzz-work/<target>/, crashes to BUILD_DIR/fuzz-crashes/;
# the committed corpus is only read, except by --merge.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
all_targets=(json_in json_text multipart route proto wsfs_normalize utf8 wsname mcp)

merge=0
if [ "${1:-}" = "--merge" ]; then
	merge=1
	shift
fi
build=${1:?usage: run.sh [--merge] BUILD_DIR [SECONDS] [TARGET...]}
shift
seconds=60
if [ "$merge" = 0 ] && [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then
	seconds=$1
	shift
fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")

work=$build/fuzz-work
crashes=$build/fuzz-crashes
mkdir -p "$crashes"
status=0
for t in "${targets[@]}"; do
	bin=$build/tests/fuzz/fuzz_$t
	if [ ! -x "$bin" ]; then
		echo "run.sh: $bin is missing (configure with -DPADDOCK_FUZZ=ON)" >&2
		exit 1
	fi
	mkdir -p "$work/$t"
	if [ "$merge" = 1 ]; then
		# Keeps what is committed; adds the found inputs that cover something new.
		"$bin" -merge=1 -rss_limit_mb=2048 "$here/corpus/$t" "$work/$t" 2>&1 |
			grep -E '^MERGE-OUTER: [0-9]+ new files' || true
		continue
	fi
	echo "== fuzz_$t for ${seconds}s"
	dict=()
	[ -f "$here/$t.dict" ] && dict=(-dict="$here/$t.dict")
	if ! "$bin" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
		-artifact_prefix="$crashes/$t-" "${dict[@]}" "$work/$t" "$here/corpus/$t" \
		>"$build/fuzz-$t.log" 2>&1; then
		echo "fuzz_$t: FAILED, see $build/fuzz-$t.log and $crashes/" >&2
		status=1
	fi
	grep -E '^stat::(number_of_executed_units|new_units_added|peak_rss_mb)|^#[0-9]+.*DONE' \
		"$build/fuzz-$t.log" || true
done
exit $status
