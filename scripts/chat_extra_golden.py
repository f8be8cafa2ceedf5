#!/usr/bin/env python3
"""Checksums of what transformers' apply_chat_template renders for every template of
../shared/golden/chat/templates with the conversations of tests/golden/chat_extra_cases.json
(tools, tool calls and results, documents, thinking, content parts, kwargs), for test_jinja:
one line per render, "STEM.CASE LENGTH CRC32" (zlib's CRC-32 of the UTF-8 text, hex) or
"STEM.CASE raises". The full texts would take megabytes; the checksum keeps the check
byte-exact. Templates that call list.append / list.pop raise SecurityError in transformers'
immutable sandbox; mgi allows both on lists the template built (as llama.cpp does), so those
renders are taken from jinja2's mutable sandbox and marked "(mutable)".
  SHARED=../shared python3 scripts/chat_extra_golden.py > tests/golden/chat_extra.crc
Needs pip install 'jinja2>=3.1.6'."""
import json, os, sys, zlib
shared = os.environ.get("SHARED", os.path.join(os.path.dirname(__file__), "..", "..", "shared"))
sys.path.insert(0, os.path.join(shared, "tools"))
os.environ["SOURCE_DATE_EPOCH"] = "1768435200"
import jinja2, jinja2.sandbox
import chat_golden

strict = chat_golden.env()
mutable = jinja2.sandbox.SandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                              extensions=[jinja2.ext.loopcontrols, chat_golden.Generation])
mutable.filters.update(strict.filters)
mutable.globals.update(strict.globals)
tdir = os.path.join(shared, "golden", "chat", "templates")
cases = json.load(open(os.path.join(os.path.dirname(__file__), "..", "tests", "golden", "chat_extra_cases.json"),
                       encoding="utf-8"))
for f in sorted(os.listdir(tdir)):
    if not f.endswith(".jinja"):
        continue
    src = open(os.path.join(tdir, f), encoding="utf-8").read()
    for name, c in cases.items():
        note = ""
        try:
            text = strict.from_string(src).render(**c)
        except jinja2.exceptions.SecurityError:
            note = " (mutable)"
            try:
                text = mutable.from_string(src).render(**c)
            except Exception:
                text = None
        except Exception:
            text = None
        if text is None:
            print(f"{f[:-6]}.{name} raises")
        else:
            data = text.encode("utf-8")
            print(f"{f[:-6]}.{name} {len(data)} {zlib.crc32(data):08x}{note}")
