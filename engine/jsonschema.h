/* JSON Schema -> GBNF, for llama.cpp's -j/--json-schema, -jf and the server's json_schema /
 * response_format: the subset users rely on (types, properties/required/additionalProperties,
 * items/prefixItems/minItems/maxItems, enum/const, anyOf/oneOf, allOf of objects, $ref to
 * $defs/definitions (recursive too), string pattern/format/minLength/maxLength, integer bounds).
 * As in llama.cpp, objects list required properties first and then optional ones, each in the
 * schema's order, and take no properties beyond `properties` unless additionalProperties is
 * true or a schema: every text the grammar allows validates, not every valid text is allowed.
 * oneOf is read as anyOf (the alternatives are not made exclusive); formats other than date,
 * time, date-time and uuid are annotations (a plain string); keywords that would be dropped
 * beside $ref, anyOf or oneOf are an error rather than silently ignored. */
#ifndef MGI_ENGINE_JSONSCHEMA_H
#define MGI_ENGINE_JSONSCHEMA_H

#include <stddef.h>

#include "engine/grammar.h"

/* The GBNF text (NUL-terminated, malloc'd, start rule "root") for a schema given as JSON text.
 * NULL with a message naming the keyword and where it is as a JSON pointer ("#/properties/x")
 * when the schema is not JSON, is malformed, or uses what a grammar cannot express
 * (e.g. not, if/then/else, uniqueItems, multipleOf, number bounds, lookahead in a pattern). */
char *jsonschema_to_gbnf(const char *json, size_t len, char *err, size_t err_size);

/* jsonschema_to_gbnf then grammar_parse. */
grammar *jsonschema_compile(const char *json, size_t len, char *err, size_t err_size);

#endif
