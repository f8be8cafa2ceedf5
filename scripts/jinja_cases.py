#!/usr/bin/env python3
# Expected outputs of the Jinja engine's unit test (tests/unit/test_jinja.c): each case's template
# rendered by jinja2 exactly as transformers' apply_chat_template does (../shared/tools/
# chat_golden.py's environment), the named cases below and then every line of
# tests/golden/jinja_snippets.txt (with SNIPPET_VARS; "\n" in a line is a newline; a snippet
# that raises in jinja2 gets NULL: mgi must refuse it too). Writes the C table
# tests/golden/jinja_cases.inc:
#   python3 scripts/jinja_cases.py > tests/golden/jinja_cases.inc     (needs pip install jinja2)
import json, os, sys
sys.path.insert(0, os.path.join(os.environ.get('SHARED', os.path.join(os.path.dirname(__file__), '..', '..', 'shared')), 'tools'))
os.environ['SOURCE_DATE_EPOCH'] = '1768435200'
import chat_golden
e = chat_golden.env()
V = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}],
     "xs": [3, 1, 2], "s": "  Hello World  ", "d": {"b": 2, "a": 1}, "n": None, "t": True, "f": 1.5, "u": "ünï"}
cases = [
 ("arith", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 7 / 2 }} {{ 6 / 3 }} {{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }}", {}),
 ("float repr", "{{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1.5e-7 }} {{ 2.0 }} {{ 1/3 }} {{ 100000.0 * 100000000000 }}", {}),
 ("concat tilde", "{{ 'a' ~ 1 ~ none ~ true ~ [1, 'x'] }}", {}),
 ("string plus", "{{ 'ab' + 'cd' }}{{ 'x' * 3 }}{{ [1] + [2] }}", {}),
 ("compare chain", "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'a' < 'b' }} {{ 1 == 1.0 }} {{ true == 1 }} {{ none == none }}", {}),
 ("in notin", "{{ 'ell' in 'hello' }} {{ 2 in xs }} {{ 'a' in d }} {{ 'z' not in d }} {{ 5 not in xs }}", V),
 ("and or values", "{{ 0 or 'x' }} {{ 1 and 'y' }} {{ none or [] }} {{ not none }}", {}),
 ("cond expr", "{{ 'yes' if t else 'no' }} {{ 'yes' if n else 'no' }}[{{ 'only' if n }}]", V),
 ("undefined prints empty", "[{{ missing }}][{{ missing is defined }}][{{ missing | default('dflt') }}][{{ d.zz }}]", V),
 ("none prints None", "{{ n }} {{ t }} {{ xs }} {{ d }} {{ {'k': 'it\\'s'} }}", V),
 ("filters strings", "{{ s | trim }}|{{ s | upper }}|{{ s | lower }}|{{ 'hello world' | title }}|{{ 'hELLO' | capitalize }}|{{ s | replace('l', 'L') }}|{{ s | length }}|{{ u | length }}|{{ u | upper }}", V),
 ("filters lists", "{{ xs | sort }} {{ xs | sort(reverse=true) }} {{ xs | first }} {{ xs | last }} {{ xs | length }} {{ xs | join(', ') }} {{ xs | max }} {{ xs | min }} {{ xs | sum }} {{ xs | reverse | list }} {{ [1, 2, 1, 3] | unique | list }}", V),
 ("map select", "{{ messages | map(attribute='role') | join(',') }}|{{ messages | selectattr('role', 'equalto', 'user') | list | length }}|{{ messages | rejectattr('role', 'eq', 'user') | map(attribute='content') | list }}|{{ [0, 1, 2, none] | select | list }}|{{ [1, 2, 3, 4] | reject('odd') | list }}|{{ ['a', 'B'] | map('upper') | list }}", V),
 ("dict filters", "{{ d | dictsort }} {{ d | items | list }} {{ d.items() | list }} {{ d.keys() | list }} {{ d.values() | list }} {{ d.get('a') }} {{ d.get('q', 9) }} {{ d['b'] }}", V),
 ("int float string", "{{ '42' | int + 1 }} {{ '3.7' | int }} {{ 'x' | int(5) }} {{ '2.5' | float }} {{ 3 | float }} {{ 42 | string ~ '!' }} {{ -3 | abs }} {{ 2.567 | round(2) }} {{ 2.5 | round }} {{ 3.5 | round }}", {}),
 ("tojson", "{{ d | tojson }}|{{ messages[1] | tojson }}|{{ 'é\"\\n' | tojson }}|{{ [1, 2.5, none, true] | tojson }}|{{ d | tojson(sort_keys=true) }}|{{ {} | tojson }}|{{ [] | tojson(indent=2) }}", V),
 ("tojson indent", "{{ {'a': [1, {'b': none}], 'c': 'x'} | tojson(indent=2) }}", {}),
 ("tojson separators", "{{ {'a': [1, 2]} | tojson(separators=(',', ':')) }}", {}),
 ("indent filter", "{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(4, first=true) }}|{{ 'a\\n\\nb' | indent(2, blank=true) }}", {}),
 ("misc filters", "{{ 'hello big world' | wordcount }} {{ [1,2,3,4,5] | batch(2) | list }} {{ 'ab' | center(6) }}| {{ '<a&b>' | e }} {{ 'x' | safe }} {{ 'abc' | list }} {{ 3 | string | length }}", {}),
 ("tests", "{{ 1 is number }}{{ 1 is integer }}{{ 1.0 is float }}{{ 'a' is string }}{{ d is mapping }}{{ xs is sequence }}{{ xs is iterable }}{{ n is none }}{{ t is boolean }}{{ t is true }}{{ 4 is even }}{{ 3 is odd }}{{ 9 is divisibleby 3 }}{{ 'abc' is lower }}{{ 'ABC' is upper }}{{ 2 is in xs }}{{ 1 is eq 1 }}{{ 1 is ne 2 }}{{ missing is undefined }}{{ n is not none }}{{ range is callable }}", V),
 ("string methods", "{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'abc'.startswith('ab') }}|{{ 'abc'.endswith(('x', 'c')) }}|{{ 'xxyy'.strip('x') }}|{{ 'a-b'.replace('-', '+') }}|{{ '{}-{}'.format(1, 'b') }}|{{ '{0}{name}'.format('x', name='y') }}|{{ ','.join(['a', 'b']) }}|{{ 'banana'.count('an') }}|{{ 'banana'.find('n') }}|{{ 'Hi'.upper() }}{{ 'Hi'.lower() }}|{{ 'a b'.title() }}", V),
 ("slicing", "{{ xs[::-1] }} {{ xs[1:] }} {{ xs[:-1] }} {{ xs[0] }} {{ xs[-1] }} {{ 'hello'[1:3] }} {{ 'hello'[::-1] }} {{ u[1:] }} {{ 'hello'[::2] }} {{ xs[5:] }}", V),
 ("whitespace control", "a  {%- if true %}  b  {% endif -%}  c\n  {{- ' d ' -}}  \n e", {}),
 ("trim lstrip blocks", "<\n  {% if true %}\n    x\n  {% endif %}\n  {# comment #}\n>{% raw %}{{ not }}{% endraw %}\n", {}),
 ("plus disables lstrip", "a\n  {%+ if true %}b{% endif %}\n", {}),
 ("loop vars", "{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }}{{ loop.cycle('a', 'b') }};{% endfor %}", V),
 ("for else filter break", "{% for x in [] %}x{% else %}empty{% endfor %}|{% for x in xs if x > 1 %}{{ x }}{{ loop.length }}{% endfor %}|{% for x in xs %}{% if x == 1 %}{% break %}{% endif %}{{ x }}{% endfor %}|{% for x in xs %}{% if x == 1 %}{% continue %}{% endif %}{{ x }}{% endfor %}", V),
 ("for unpack dict", "{% for k, v in d | dictsort %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}{% for c in 'ab' %}{{ c }}.{% endfor %}", V),
 ("scoping", "{% set x = 1 %}{% for i in xs %}{% set x = i %}{% endfor %}{{ x }}|{% set ns = namespace(x=1, y='a') %}{% for i in xs %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}{{ ns.y }}|{% if true %}{% set z = 5 %}{% endif %}{{ z }}", V),
 ("set block", "{% set blk %}  a{{ 1 + 1 }}  {% endset %}[{{ blk }}]{% set a, b = [1, 2] %}{{ a }}{{ b }}{% set t2 | upper %}up{% endset %}{{ t2 }}", {}),
 ("macros", "{% macro m(a, b='B', c=none) %}[{{ a }}{{ b }}{{ c }}]{% endmacro %}{{ m(1) }}{{ m(1, 2) }}{{ m(1, c=3) }}{{ m() }}", {}),
 ("macro caller", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}inner{{ 1 }}{% endcall %}{% macro two() %}{{ caller(7) }}{% endmacro %}{% call(v) two() %}v={{ v }}{% endcall %}", {}),
 ("macro recursion", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1) | int }}{% endif %}{% endmacro %}{{ fact(5) }}", {}),
 ("filter block", "{% filter upper %}abc {{ 'd' }}{% endfilter %}|{% filter trim %}  x  {% endfilter %}", {}),
 ("generation block", "a{% generation %}b{{ 1 }}{% endgeneration %}c", {}),
 ("range", "{{ range(3) | list }} {{ range(1, 7, 2) | list }} {{ range(3, 0, -1) | list }}", {}),
 ("strftime", "{{ strftime_now('%Y-%m-%d %H:%M %A %d %B') }}", {}),
 ("list append", "{% set l = [] %}{% set _ = l.append(1) %}{% set _ = l.append('x') %}{{ l }}{{ l | length }}{{ l.pop() }}{{ l }}", {}),
 ("string escapes", "{{ 'a\\tb\\\\c\\'d' }}|{{ \"q\\\"q\" }}|{{ '\\u00e9\\x41' }}|{{ 'adj' 'acent' }}", {}),
 ("attr and item", "{{ messages[0].role }} {{ messages[0]['content'] }} {{ messages | length }} {{ messages[-1].content }}", V),
 ("unicode strip", "[{{ '\\u3000 x \\xa0' | trim }}]", {}),
 ("dict literal int keys", "{% set m = {1: 'a', 'k': 2} %}{{ m[1] }}{{ m.k }}{{ m | dictsort(by='value') if false else m.items() | list }}", {}),
 ("is not", "{{ 1 is not string }} {{ 'a' is not mapping }} {{ not 1 is string }}", {}),
 ("unary minus filter", "{{ -1 | abs }} {{ - 2 ** 2 }} {{ (-2) ** 2 }}", {}),
 ("nested loops", "{% for a in [1, 2] %}{% for b in 'xy' %}{{ a }}{{ b }}{{ loop.index }}{% endfor %}{{ loop.index }};{% endfor %}", {}),
 ("percent format", "{{ '%s-%d-%.2f' % ('a', 3, 1.5) }} {{ '%s!' | format('x') }}", {}),
 ("comments", "a{# comment #}b{#- trimmed -#}  c", {}),
 ("trailing newline", "x\n", {}),
 ("default boolean", "{{ '' | default('e', true) }}{{ '' | d('f') }}{{ none | default('n') }}", {}),
]
SNIPPET_VARS = {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U1"},
                             {"role": "assistant", "content": "A1"}, {"role": "user", "content": "U2"}],
                "xs": [3, 1, 2], "d": {"b": 2, "a": 1}, "s": "Hello, World", "n": None, "e": [],
                "nested": {"a": {"b": [1, {"c": "deep"}]}}}
here = os.path.dirname(os.path.abspath(__file__))
for i, line in enumerate(open(os.path.join(here, "..", "tests", "golden", "jinja_snippets.txt"), encoding="utf-8")):
    if line.strip():
        cases.append(("snippet %d" % (i + 1), line.rstrip("\n").replace("\\n", "\n"), SNIPPET_VARS))

def cstr(x):
    if x is None:
        return "NULL"
    out = '"'
    for ch in x.encode():
        c = chr(ch)
        if c == '"': out += '\\"'
        elif c == '\\': out += '\\\\'
        elif c == '\n': out += '\\n'
        elif c == '\t': out += '\\t'
        elif 32 <= ch < 127: out += c
        else: out += '\\x%02x""' % ch
    return out + '"'
print("/* generated by rendering each template with jinja2 3.1.6 as transformers does */")
import jinja2.sandbox
pe = jinja2.sandbox.SandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols, chat_golden.Generation])
pe.filters.update(e.filters); pe.globals.update(e.globals)
for name, tpl, vars_ in cases:
    # list.append/pop: transformers' immutable sandbox refuses them, mgi allows them on lists the
    # template built (as llama.cpp does): checked against jinja2's mutable sandbox
    try:
        r = (pe if name == "list append" else e).from_string(tpl).render(**vars_)
    except Exception:
        r = None
    print("    {%s,\n     %s,\n     %s,\n     %s}," % (cstr(name), cstr(tpl), cstr(json.dumps(vars_) if vars_ else "{}"), cstr(r)))
