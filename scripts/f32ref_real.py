#!/usr/bin/env python3
"""Writes tests/golden/arch_real/f32ref.json: llama.cpp (../shared/tools/peer.sh, -t 2, -fa off,
f32 KV cache) on copies of the two real models with every tensor dequantised to f32 by gguf-py, so
that llama.cpp computes in f32 from the same weights mgi's CPU reference dequantises: perplexity on
golden/real/text.txt at -c 128 -b 128 and greedy text (-n 32 -c 256) of golden/real's prompts.
Needs `pip install gguf numpy` and about 1.5 GB in TMPDIR; not run by the tests.

  python3 scripts/f32ref_real.py [MODELS_DIR (default models-real)] [SHARED (default ../shared)]
"""
import json, os, subprocess, sys, tempfile

import numpy as np
from gguf import GGUFReader, GGUFValueType, GGUFWriter
from gguf.quants import dequantize

MODELS = [("gemma3", "gemma-3-270m-q4_k_m.gguf"), ("smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")]
PEER_ARGS = ["-t", "2", "-fa", "off", "-ctk", "f32", "-ctv", "f32"]


def to_f32(src, dst):
    r = GGUFReader(src)
    f = r.fields["general.architecture"]
    w = GGUFWriter(dst, str(bytes(f.parts[f.data[0]]), "utf-8"))
    for k, f in r.fields.items():
        if k.startswith("GGUF.") or k == "general.architecture":
            continue
        t = f.types[0]
        if t == GGUFValueType.ARRAY:
            st = f.types[-1]
            v = ([str(bytes(f.parts[i]), "utf-8") for i in f.data] if st == GGUFValueType.STRING
                 else [f.parts[i].tolist()[0] for i in f.data])
            w.add_key_value(k, v, t, sub_type=st)
        elif t == GGUFValueType.STRING:
            w.add_key_value(k, str(bytes(f.parts[f.data[0]]), "utf-8"), t)
        else:
            w.add_key_value(k, f.parts[f.data[0]].tolist()[0], t)
    for t in r.tensors:
        a = dequantize(t.data, t.tensor_type).astype(np.float32)
        w.add_tensor(t.name, a.reshape([int(x) for x in t.shape][::-1]))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    models = sys.argv[1] if len(sys.argv) > 1 else "models-real"
    shared = sys.argv[2] if len(sys.argv) > 2 else "../shared"
    peer = os.path.join(shared, "tools", "peer.sh")
    real = os.path.join(shared, "golden", "real")
    out = {"about": "llama.cpp b11434 CPU (-t 2, -fa off, -ctk f32 -ctv f32) on copies of the real models with "
           "every tensor dequantised to f32 by gguf-py (so llama.cpp computes in f32 from the same weights mgi "
           "dequantises): perplexity on golden/real/text.txt at -c 128 -b 128, and llama-completion --temp 0 -n 32 "
           "-c 256 on the prompts of golden/real/MODEL-pN.json; the text is what mgi run prints: "
           "llama-completion's closing newlines and ' [end of text]' removed"}
    with tempfile.TemporaryDirectory() as tmp:
        for name, file in MODELS:
            f32 = os.path.join(tmp, name + "-f32.gguf")
            to_f32(os.path.join(models, file), f32)
            r = subprocess.run([peer, "llama-perplexity", "-m", f32, "-f", os.path.join(real, "text.txt"), "-c", "128",
                                "-b", "128"] + PEER_ARGS, capture_output=True, text=True, check=True)
            ppl = float((r.stdout + r.stderr).split("Final estimate: PPL = ")[1].split()[0])
            greedy = {}
            for p in range(3):
                prompt = json.load(open(os.path.join(real, f"{name}-p{p}.json")))["prompt"]
                r = subprocess.run([peer, "llama-completion", "-m", f32, "-p", prompt, "-n", "32", "--temp", "0",
                                    "-no-cnv", "-c", "256"] + PEER_ARGS, capture_output=True, text=True, check=True)
                text = r.stdout
                assert text.startswith(prompt) and text.endswith("\n\n"), (name, p, text[:80])
                text = text[len(prompt):-2]
                for end in (" [end of text]\n", " [end of text]"):
                    if text.endswith(end):
                        text = text[:-len(end)]
                greedy[f"p{p}"] = text
            out[name] = {"ppl": ppl, "greedy_text": greedy}
            os.remove(f32)
    json.dump(out, open("tests/golden/arch_real/f32ref.json", "w"), indent=1, ensure_ascii=False)


if __name__ == "__main__":
    main()
