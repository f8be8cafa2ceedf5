#!/usr/bin/env bash
# Line coverage per source folder from plain gcov over a --coverage build (make coverage):
# coverage.sh BUILD_DIR FOLDER... prints each file's lines % and the folder's total.
set -u
build=$1; shift
root=$(pwd)
for d in "$@"; do
    srcs=()
    for f in "$d"/*.c; do
        case $f in *_cuda.c) ;; *) [ -f "$build/${f%.c}.gcda" ] && srcs+=("$root/$f") ;; esac
    done
    if [ ${#srcs[@]} -eq 0 ]; then echo "$d/: no coverage data"; continue; fi
    (cd "$build/$d" && gcov -n -o . "${srcs[@]}" 2>/dev/null) |
        awk -v d="$d" -v root="$root/" '
            /^File / { f = $2; gsub("\047", "", f); sub(root, "", f) }
            /^Lines executed:/ {
                split($2, a, ":"); p = a[2] + 0; n = $4 + 0
                if (f != "" && index(f, d "/") == 1) { hit += p * n / 100; tot += n; printf "  %-28s %6.2f%% of %d lines\n", f, p, n }
                f = ""   # gcov ends with a total line of its own, after no File line
            }
            END { if (tot) printf "%s/: %.2f%% of %d lines\n", d, 100 * hit / tot, tot }'
done
