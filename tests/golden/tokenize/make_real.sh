#!/usr/bin/env bash
# Writes real.tsv: the ids llama.cpp's llama-tokenize (the peer, ../shared/tools/peer.sh) gives
# for each case of cases.txt ("FLAGS<TAB>TEXT", FLAGS "-" for none; the text's \n and \t escapes
# are read by both tools) on the two real models and on nine of ../shared/vocab's vocabularies
# (special-token text parsed, BOS as each file says). tests/e2e/tokenize_real.sh checks mgi
# against it. Run from the top of the tree: bash tests/golden/tokenize/make_real.sh
set -euo pipefail
SHARED=${SHARED:-../shared}
here=tests/golden/tokenize
"$SHARED/tools/fetch_real_models.sh" models-real >/dev/null
out=$here/real.tsv.tmp
: >"$out"
for model in SmolLM2-135M-Instruct.Q4_1.gguf gemma-3-270m-q4_k_m.gguf ggml-vocab-gpt-2.gguf \
             ggml-vocab-llama-bpe.gguf ggml-vocab-qwen35.gguf ggml-vocab-deepseek-llm.gguf \
             ggml-vocab-deepseek-coder.gguf ggml-vocab-falcon.gguf ggml-vocab-command-r.gguf \
             ggml-vocab-gemma-4.gguf ggml-vocab-phi-3.gguf; do
    case $model in ggml-vocab-*) path=$SHARED/vocab/$model ;; *) path=models-real/$model ;; esac
    while IFS=$'\t' read -r flags text; do
        args=()
        [ "$flags" != - ] && read -ra args <<<"$flags"
        ids=$("$SHARED/tools/peer.sh" llama-tokenize -m "$path" -p "$text" --ids --log-disable \
              "${args[@]}" 2>/dev/null | tail -1)
        case $ids in "["*"]") ;; *) echo "make_real.sh: no ids for '$text' on $model" >&2; exit 1 ;; esac
        printf '%s\t%s\t%s\t%s\n' "$model" "$flags" "$text" "$ids" >>"$out"
    done <"$here/cases.txt"
done
mv "$out" "$here/real.tsv"
echo "wrote $here/real.tsv ($(wc -l <"$here/real.tsv") cases)" >&2
