"""Structured-output checks for tests/e2e/structured.sh, with python3's standard library only:
writes the 50 schema requests, and validates result lines against their schemas with a small
validator of the keywords those schemas use (type, properties, required, additionalProperties,
items, minItems, maxItems, enum, const, minimum, maximum, minLength, maxLength, $ref to $defs,
anyOf)."""
import json
import sys

NAMES = ["ann", "bo", "cy", "dee", "eve"]
COLORS = ["red", "green", "blue", "cyan"]


def schemas():
    """50 schemas, each different: objects with required fields, arrays with bounds, enums,
    nested $defs with $ref, anyOf. Every string and array is bounded, so every text ends."""
    out = []
    for i in range(50):
        k = i % 5
        lo, hi = i, i + 7 + i % 13
        if k == 0:  # object, required fields of several types
            props = {"name": {"type": "string", "maxLength": 3 + i % 5},
                     "age": {"type": "integer", "minimum": lo, "maximum": hi},
                     "ok": {"type": "boolean"}}
            req = ["name", "age"] if i % 2 else ["age", "ok"]
            out.append({"type": "object", "properties": props, "required": req})
        elif k == 1:  # array with bounds
            item = [{"type": "integer", "minimum": -i, "maximum": i + 3},
                    {"enum": COLORS[: 2 + i % 3]},
                    {"type": "string", "minLength": 1, "maxLength": 4},
                    {"type": "boolean"}][i % 4]
            mn = i % 3
            out.append({"type": "array", "items": item, "minItems": mn, "maxItems": mn + 1 + i % 3})
        elif k == 2:  # enums and consts
            vals = [NAMES[j % 5] + str(i) for j in range(1 + i % 4)] + [i, None, True][: 1 + i % 3]
            out.append({"type": "object", "properties": {"pick": {"enum": vals}, "v": {"const": i}},
                        "required": ["pick", "v"]})
        elif k == 3:  # nested $defs with $ref
            out.append({
                "$defs": {"pt": {"type": "object",
                                 "properties": {"x": {"type": "integer", "minimum": 0, "maximum": 9 + i},
                                                "y": {"type": "integer", "minimum": -9, "maximum": i}},
                                 "required": ["x", "y"]},
                          "seg": {"type": "object", "properties": {"a": {"$ref": "#/$defs/pt"},
                                                                  "b": {"$ref": "#/$defs/pt"}},
                                  "required": ["a"] if i % 2 else ["a", "b"]}},
                "type": "object",
                "properties": {"segs": {"type": "array", "items": {"$ref": "#/$defs/seg"}, "minItems": 1,
                                        "maxItems": 1 + i % 2},
                               "tag": {"enum": COLORS}},
                "required": ["segs", "tag"]})
        else:  # anyOf and nested objects
            out.append({"type": "object",
                        "properties": {"id": {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 99 + i},
                                                        {"type": "string", "maxLength": 5}]},
                                       "inner": {"type": "object",
                                                 "properties": {"c": {"enum": COLORS[i % 3:]},
                                                                "n": {"type": "null"}},
                                                 "required": ["c"] + (["n"] if i % 2 else [])}},
                        "required": ["id", "inner"]})
    return out


def write_requests(path, temp, n_predict):
    prompts = ["A JSON record:", "Data:", "Answer in JSON.", "The result is", "Output:"]
    with open(path, "w") as f:
        for i, s in enumerate(schemas()):
            r = {"id": "s%d" % i, "prompt": prompts[i % 5], "temperature": temp, "seed": 1000 + i,
                 "n_predict": n_predict}
            # the three ways of giving a schema, in turn
            if i % 3 == 0:
                r["json_schema"] = s
            elif i % 3 == 1:
                r["response_format"] = {"type": "json_schema", "json_schema": {"schema": s}}
            else:
                r["response_format"] = {"type": "json_object", "schema": s}
            f.write(json.dumps(r) + "\n")


TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def validate(v, s, root, at="#"):
    """A list of problems of value v under schema s (empty: valid)."""
    if "$ref" in s:
        name = s["$ref"].split("/")[-1]
        return validate(v, root["$defs"][name], root, at)
    if "anyOf" in s:
        return [] if any(not validate(v, a, root, at) for a in s["anyOf"]) else ["%s: no anyOf matches" % at]
    errs = []
    t = s.get("type")
    if t == "integer":
        if not (isinstance(v, int) and not isinstance(v, bool)):
            return ["%s: %r is not an integer" % (at, v)]
    elif t == "number":
        if not (isinstance(v, (int, float)) and not isinstance(v, bool)):
            return ["%s: %r is not a number" % (at, v)]
    elif t and not isinstance(v, TYPES[t]):
        return ["%s: %r is not %s" % (at, v, t)]
    if "enum" in s and not any(v == e and type(v) == type(e) for e in s["enum"]):
        errs.append("%s: %r not in enum" % (at, v))
    if "const" in s and not (v == s["const"] and type(v) == type(s["const"])):
        errs.append("%s: %r is not the const" % (at, v))
    if "minimum" in s and v < s["minimum"] or "maximum" in s and v > s["maximum"]:
        errs.append("%s: %r out of bounds" % (at, v))
    if isinstance(v, str) and (len(v) < s.get("minLength", 0) or len(v) > s.get("maxLength", 1 << 30)):
        errs.append("%s: length %d out of bounds" % (at, len(v)))
    if isinstance(v, dict):
        props = s.get("properties", {})
        for r in s.get("required", []):
            if r not in v:
                errs.append("%s: missing %s" % (at, r))
        for k, x in v.items():
            if k in props:
                errs += validate(x, props[k], root, at + "/" + k)
            elif s.get("additionalProperties") is False:
                errs.append("%s: extra property %s" % (at, k))
    if isinstance(v, list):
        if len(v) < s.get("minItems", 0) or len(v) > s.get("maxItems", 1 << 30):
            errs.append("%s: %d items out of bounds" % (at, len(v)))
        for j, x in enumerate(v):
            errs += validate(x, s.get("items", {}), root, "%s/%d" % (at, j))
    return errs


def check(results):
    """Exit 0 when every result line stopped, parses as JSON and validates; else one line why."""
    sch = schemas()
    seen = 0
    for line in open(results):
        o = json.loads(line)
        i = int(o["id"][1:])
        if o["finish_reason"] != "stop":
            print("%s: finish_reason %s (%s)" % (o["id"], o["finish_reason"], o.get("error", "")[:200]))
            return 1
        try:
            v = json.loads(o["text"])
        except ValueError as e:
            print("%s: not JSON (%s): %r" % (o["id"], e, o["text"][:200]))
            return 1
        errs = validate(v, sch[i], sch[i])
        if errs:
            print("%s: %s in %r" % (o["id"], "; ".join(errs[:3]), o["text"][:200]))
            return 1
        seen += 1
    if seen != len(sch):
        print("%d result lines, expected %d" % (seen, len(sch)))
        return 1
    return 0


def selftest():
    """The validator must be able to fail: wrong types, bounds, enums, missing fields, refs."""
    sch = schemas()
    bad = [(sch[0], {"age": 99, "ok": True}), (sch[0], {"age": 3}), (sch[0], {"age": 3, "ok": 1}),
           (sch[1], []), (sch[1], ["red", "red", "red", "red"]), (sch[1], ["black"]),
           (sch[2], {"pick": "zz", "v": 2}), (sch[2], {"pick": "ann2", "v": 3}),
           (sch[3], {"segs": [{"a": {"x": 0, "y": 99}}], "tag": "red"}), (sch[3], {"segs": [], "tag": "red"}),
           (sch[4], {"id": True, "inner": {"c": "green"}}), (sch[4], {"id": "toolong", "inner": {"c": "red"}})]
    good = [(sch[0], {"age": 3, "ok": True}), (sch[3], {"segs": [{"a": {"x": 0, "y": 3}}], "tag": "red"})]
    for s, v in bad:
        if not validate(v, s, s):
            print("validator accepts %r" % (v,))
            return 1
    for s, v in good:
        if validate(v, s, s):
            print("validator rejects %r" % (v,))
            return 1
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write_requests(sys.argv[2], float(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[1] == "schemas":  # the schemas one per line, for checking with jsonschema by hand
        for s in schemas():
            print(json.dumps(s))
    elif sys.argv[1] == "selftest":
        sys.exit(selftest())
    else:
        sys.exit(check(sys.argv[2]))
