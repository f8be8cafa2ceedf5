#!/usr/bin/env bash
# Writes pre.tsv: for every pre-tokenizer name of engine/tokenizer_pre.c, the ids llama.cpp's
# llama-tokenize (the peer, ../shared/tools/peer.sh) gives for each case of pre_cases.inp (cases
# separated by the line __ggml_vocab_test__, as in ../shared/vocab) on GPT-2's vocabulary with
# tokenizer.ggml.pre set to that name, BOS as the name's default. test_tokenizer checks mgi
# against it. Run from the top of the tree after `make all`: bash tests/golden/tokenize/make_pre.sh
set -euo pipefail
SHARED=${SHARED:-../shared}
BUILD=${BUILD:-build}
here=tests/golden/tokenize
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O1 -I. -D_GNU_SOURCE "$here/write_pre_vocab.c" "$BUILD/libmgi_cpu.a" -lm -lpthread -lz -lcjson -lpcre2-8 \
   -o "$tmp/write_pre_vocab"
python3 - "$here/pre_cases.inp" "$tmp" <<'PY'
import sys
cases = open(sys.argv[1], encoding='utf-8', newline='').read().split('\n__ggml_vocab_test__\n')[:-1]
for i, c in enumerate(cases):
    open('%s/case%02d.txt' % (sys.argv[2], i), 'w', encoding='utf-8', newline='').write(c)
PY
names=$(grep -o '{"[^"]*", row_[a-z0-9_]*' engine/tokenizer_pre.c | sed 's/{"\([^"]*\)".*/\1/')
out=$here/pre.tsv.tmp
: >"$out"
for name in $names; do
    "$tmp/write_pre_vocab" "$SHARED/vocab/ggml-vocab-gpt-2.gguf" "$name" "$tmp/v.gguf"
    for f in "$tmp"/case*.txt; do
        i=$(basename "$f" .txt); i=${i#case}
        ids=$("$SHARED/tools/peer.sh" llama-tokenize -m "$tmp/v.gguf" -f "$f" --no-escape --ids --log-disable \
              2>"$tmp/err" | tail -1) || true
        case $ids in "["*"]") ;; *) ids="error: $(grep -m1 -i 'error\|unknown\|failed' "$tmp/err" || true)" ;; esac
        printf '%s\t%s\t%s\n' "$name" "$((10#$i))" "$ids" >>"$out"
    done
done
mv "$out" "$here/pre.tsv"
echo "wrote $here/pre.tsv ($(wc -l <"$here/pre.tsv") lines)" >&2
