#!/usr/bin/env bash
# End-to-end checks of `mgi tokenize` ($MGI) on the shared model and vocabularies ($SHARED):
# llama-tokenize's output forms, the text sources, BOS and special-token flags, and errors
# (exit status and one "mgi: " line on stderr, nothing on stdout).
set -u
MGI=${MGI:-build/mgi}
SHARED=${SHARED:-../shared}
M=$SHARED/models/aidreams260K-f32.gguf
SPM=$SHARED/vocab/ggml-vocab-llama-spm.gguf
GPT2=$SHARED/vocab/ggml-vocab-gpt-2.gguf
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() {  # name, expected, actual
    if [ "$2" = "$3" ]; then echo "PASS tokenize $1"; else echo "FAIL tokenize $1: got '$3', want '$2'"; fi
}

# name, expected exit status, args...: the status, one "mgi: " line on stderr, empty stdout
check_error() {
    local name=$1 want=$2; shift 2
    "$MGI" tokenize "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    local lines; lines=$(wc -l <"$tmp/err")
    if [ "$rc" -eq "$want" ] && [ "$lines" -eq 1 ] && grep -q '^mgi: ' "$tmp/err" && [ ! -s "$tmp/out" ]; then
        echo "PASS tokenize $name"
    else
        echo "FAIL tokenize $name: exit $rc (want $want), stderr '$(head -c 200 "$tmp/err")', stdout $(wc -c <"$tmp/out") bytes"
    fi
}

if [ ! -x "$MGI" ]; then echo "FAIL tokenize: $MGI is not built"; exit 1; fi
if [ ! -f "$M" ] || [ ! -f "$SPM" ] || [ ! -f "$GPT2" ]; then echo "SKIP tokenize: shared files not present"; exit 0; fi

once='[1, 429, 491, 433, 295, 429, 444, 445, 265, 262, 263, 342, 430]'
check "golden 'Once upon a time'" "$once" "$("$MGI" tokenize -m "$M" -p "Once upon a time")"
check "--ids --log-disable" "$once" "$("$MGI" tokenize -m "$M" -p "Once upon a time" --ids --log-disable)"
check "golden 'The garden of silicon dreams'" \
    '[1, 368, 430, 316, 278, 441, 267, 275, 266, 403, 440, 265, 281, 269, 435, 447, 431]' \
    "$("$MGI" tokenize -m "$M" -p "The garden of silicon dreams")"
check "empty prompt is [1]" '[1]' "$("$MGI" tokenize -m "$M" -p "")"
check "--no-bos" '[429, 491, 433, 295, 429, 444, 445, 265, 262, 263, 342, 430]' \
    "$("$MGI" tokenize -m "$M" -p "Once upon a time" --no-bos)"
printf 'Once upon a time' >"$tmp/p.txt"
check "-f FILE" "$once" "$("$MGI" tokenize -m "$M" -f "$tmp/p.txt")"
check "--stdin" "$once" "$("$MGI" tokenize -m "$M" --stdin <"$tmp/p.txt")"
check "--pieces lines" "$(printf "     1 -> '<s>'\n   429 -> ' '\n   491 -> 'O'")" \
    "$("$MGI" tokenize -m "$M" -p "Once upon a time" --pieces | head -3)"
check "--show-count" "Total number of tokens: 13" "$("$MGI" tokenize -m "$M" -p "Once upon a time" --show-count | tail -1)"
check "vocabulary-only SPM file" '[1, 15043, 3186]' "$("$MGI" tokenize -m "$SPM" -p "Hello world")"
check "SPM parses <s> by default" '[1, 1, 15043]' "$("$MGI" tokenize -m "$SPM" -p "<s>Hello")"
check "vocabulary-only GPT-2 file, special text parsed" '[15496, 995, 50256]' \
    "$("$MGI" tokenize -m "$GPT2" -p "Hello world<|endoftext|>")"
check "--no-parse-special" '[15496, 995, 27, 91, 437, 1659, 5239, 91, 29]' \
    "$("$MGI" tokenize -m "$GPT2" -p "Hello world<|endoftext|>" --no-parse-special)"
check "escapes in the text by default" '[64, 198, 65]' "$("$MGI" tokenize -m "$GPT2" -p 'a\nb')"
check "--no-escape" '[64, 59, 46803]' "$("$MGI" tokenize -m "$GPT2" -p 'a\nb' --no-escape)"
check "--help" 0 "$("$MGI" tokenize --help >/dev/null; echo $?)"

check_error "missing -m is a usage error" 1 -p "x"
check_error "missing text is a usage error" 1 -m "$M"
check_error "two text sources is a usage error" 1 -m "$M" -p x --stdin
check_error "unknown flag is a usage error" 1 -m "$M" -p x --bogus
check_error "-m without a value is a usage error" 1 -m
check_error "unreadable model is bad input" 2 -m "$tmp/none.gguf" -p x
printf 'not a gguf file at all' >"$tmp/bad.gguf"
check_error "non-GGUF model is bad input" 2 -m "$tmp/bad.gguf" -p x
check_error "unreadable -f file is bad input" 2 -m "$M" -f "$tmp/none.txt"
BERT=$SHARED/vocab/ggml-vocab-bert-bge.gguf
if [ -f "$BERT" ]; then
    check_error "WordPiece vocabulary is bad input" 2 -m "$BERT" -p x
    check "WordPiece refused by name" 1 "$(grep -c "tokenizer model 'bert' (WordPiece) is not supported; mgi runs: llama" "$tmp/err")"
fi
for v in qwen2 deepseek-coder gemma-4; do
    f=$SHARED/vocab/ggml-vocab-$v.gguf
    [ -f "$f" ] || continue
    # the first case of llama.cpp's test file for it ("ied 4 ½ months"), without BOS as there
    want=$(sed -n 1p "$f.out" | sed 's/^ *//; s/ *$//; s/  */, /g')
    got=$("$MGI" tokenize -m "$f" -p "$(head -1 "$f.inp")" --ids --no-bos 2>&1)
    check "vocabulary-only $v file, its first test case" "[$want]" "$got"
done
