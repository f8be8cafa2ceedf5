/* Objects and arrays for the JSON Schema converter: properties in llama.cpp's layout (required
 * first, then any ordered subset of the optional ones, extra properties only when
 * additionalProperties allows them, their keys kept apart from the named ones by a trie of
 * rules), allOf merged as objects, items / prefixItems with minItems / maxItems. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/jsonschema_internal.h"

typedef struct {
    const char *key;
    const cJSON *schema;
    char *ptr;
    int required;
} prop;

/* The contents of a JSON string that is none of keys[0..n) (sorted), after a shared prefix of
 * depth bytes, as a rule (one per trie node, so the grammar nests no deeper for long keys):
 * each next character of a key continues down that key's branch, any other character (or an
 * escape) leaves every key behind, and the string may end here unless a key ends here.
 * Returns the rule name (malloc'd) or NULL. */
static char *not_keys(jsonschema_conv *c, const char **keys, int n, size_t depth, const char *name, const char *ptr) {
    int ends = 0, alts = 0;
    jsonschema_buf b = {0}, other = {0};
    jsonschema_buf_puts(&other, "[^\"\\\\\\x7F\\x00-\\x1F");
    for (int i = 0; i < n;) {
        if (strlen(keys[i]) == depth) { ends = 1; i++; continue; }
        const unsigned char *p = (const unsigned char *)keys[i] + depth;
        size_t cl = p[0] < 0x80 ? 1 : p[0] >= 0xF0 ? 4 : p[0] >= 0xE0 ? 3 : 2;
        int j = i;
        while (j < n && strlen(keys[j]) >= depth + cl && memcmp(keys[j] + depth, p, cl) == 0) j++;
        if (j == i) { i++; continue; } /* a truncated character: no branch */
        uint32_t cp = cl == 1 ? p[0] : p[0] & (0x3Fu >> (cl - 1));
        for (size_t k = 1; k < cl; k++) cp = cp << 6 | (p[k] & 0x3Fu);
        jsonschema_buf_class_char(&other, cp);
        char *sub = not_keys(c, keys + i, j - i, depth + cl, name, ptr);
        if (!sub) { free(b.s); free(other.s); return NULL; }
        if (alts++) jsonschema_buf_puts(&b, " | ");
        jsonschema_buf_literal(&b, (const char *)p, cl);
        jsonschema_buf_printf(&b, " %s", sub);
        free(sub);
        i = j;
    }
    jsonschema_buf_puts(&other, "] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" ([0-9a-cA-CefEF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}))) char*");
    if (alts++) jsonschema_buf_puts(&b, " | ");
    jsonschema_buf_puts(&b, "(");
    jsonschema_buf_add(&b, other.s ? other.s : "", other.n);
    free(other.s);
    if (!ends) jsonschema_buf_puts(&b, " | \"\"");
    return jsonschema_name_body(c, name, jsonschema_take(c, &b, ptr));
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static char *build_object(jsonschema_conv *c, prop *props, int n, const cJSON *addl, const char *name, const char *ptr) {
    char **kv = calloc((size_t)n + 1, sizeof *kv); /* [n] is the additional-properties pair */
    char **rest = calloc((size_t)n + 2, sizeof *rest);
    int *order = malloc(((size_t)n + 1) * sizeof *order);
    jsonschema_buf b = {0};
    char *result = NULL;
    if (!kv || !rest || !order) { jsonschema_fail(c, ptr, "out of memory"); goto out; }
    for (int i = 0; i < n; i++) {
        char sub[200];
        snprintf(sub, sizeof sub, "%s-%s", name, props[i].key);
        char *v = jsonschema_visit(c, props[i].schema, sub, props[i].ptr);
        if (!v) goto out;
        jsonschema_buf kb = {0};
        cJSON *ks = cJSON_CreateString(props[i].key);
        if (!ks || jsonschema_json_literal(c, &kb, ks, props[i].ptr)) { cJSON_Delete(ks); free(v); free(kb.s); goto out; }
        cJSON_Delete(ks);
        jsonschema_buf_printf(&kb, " space \":\" space %s", v);
        free(v);
        snprintf(sub, sizeof sub, "%s-%s-kv", name, props[i].key);
        if (!(kv[i] = jsonschema_name_body(c, sub, jsonschema_take(c, &kb, ptr)))) goto out;
    }
    int n_opt = 0, n_req = 0;
    for (int i = 0; i < n; i++) if (props[i].required) order[n_req++] = i;
    for (int i = 0; i < n; i++) if (!props[i].required) order[n_req + n_opt++] = i;
    if (addl && !cJSON_IsFalse(addl)) {
        char *v;
        char sub[200];
        snprintf(sub, sizeof sub, "%s-additional", name);
        if (cJSON_IsTrue(addl)) { jsonschema_need(c, "value"); v = jsonschema_dup(c, "value"); }
        else v = jsonschema_visit(c, addl, sub, ptr);
        if (!v) goto out;
        const char **keys = malloc(((size_t)n + 1) * sizeof *keys);
        if (!keys) { free(v); jsonschema_fail(c, ptr, "out of memory"); goto out; }
        for (int i = 0; i < n; i++) keys[i] = props[i].key;
        qsort(keys, (size_t)n, sizeof *keys, cmp_str);
        jsonschema_need(c, "char");
        jsonschema_need(c, "space");
        int too_long = 0;
        for (int i = 0; i < n; i++) too_long |= strlen(keys[i]) > 256;
        snprintf(sub, sizeof sub, "%s-additional-k", name);
        char *nk = too_long ? jsonschema_fail(c, ptr, "a property name longer than 256 bytes beside additionalProperties")
                            : not_keys(c, keys, n, 0, sub, ptr);
        free(keys);
        if (!nk) { free(v); goto out; }
        jsonschema_buf kb = {0};
        jsonschema_buf_printf(&kb, "\"\\\"\" %s \"\\\"\" space \":\" space %s", nk, v);
        free(nk);
        free(v);
        snprintf(sub, sizeof sub, "%s-additional-kv", name);
        if (!(kv[n] = jsonschema_name_body(c, sub, jsonschema_take(c, &kb, ptr)))) goto out;
        order[n_req + n_opt++] = n;
    }
    /* rest[k]: the optional pairs from order[n_req + k] on, each preceded by a comma, any subset
     * in order (the additional pair, last, may repeat). */
    for (int k = n_opt - 1; k >= 1; k--) {
        int i = order[n_req + k];
        jsonschema_buf rb = {0};
        jsonschema_buf_printf(&rb, "( \",\" space %s )%s", kv[i], i == n ? "*" : "?");
        if (rest[k + 1]) jsonschema_buf_printf(&rb, " %s", rest[k + 1]);
        char sub[200];
        snprintf(sub, sizeof sub, "%s-%s-rest", name, i == n ? "additional" : props[i].key);
        if (!(rest[k] = jsonschema_name_body(c, sub, jsonschema_take(c, &rb, ptr)))) goto out;
    }
    jsonschema_need(c, "space");
    jsonschema_buf_puts(&b, "\"{\" space");
    for (int k = 0; k < n_req; k++) jsonschema_buf_printf(&b, "%s %s", k ? " \",\" space" : "", kv[order[k]]);
    if (n_opt) {
        jsonschema_buf_puts(&b, n_req ? " ( \",\" space ( " : " ( ");
        for (int k = 0; k < n_opt; k++) {
            int i = order[n_req + k];
            jsonschema_buf_printf(&b, "%s%s%s", k ? " | " : "", kv[i], i == n ? " ( \",\" space " : "");
            if (i == n) jsonschema_buf_printf(&b, "%s )*", kv[i]);
            if (rest[k + 1]) jsonschema_buf_printf(&b, " %s", rest[k + 1]);
        }
        jsonschema_buf_puts(&b, n_req ? " ) )?" : " )?");
    }
    jsonschema_buf_puts(&b, " \"}\" space");
    result = jsonschema_take(c, &b, ptr);
out:
    for (int i = 0; kv && i <= n; i++) free(kv[i]);
    for (int i = 0; rest && i <= n + 1; i++) free(rest[i]);
    free(kv); free(rest); free(order);
    if (!result) free(b.s);
    return result;
}

/* Collects the properties of s (and, for allOf, of each part) into *props. */
static int collect_props(jsonschema_conv *c, const cJSON *s, const char *ptr, prop **props, int *n, int *cap, const cJSON **addl) {
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON *ad = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    if (ad) *addl = ad;
    if (ps && !cJSON_IsObject(ps)) { jsonschema_fail(c, ptr, "'properties' must be an object"); return -1; }
    if (req && !cJSON_IsArray(req)) { jsonschema_fail(c, ptr, "'required' must be an array of strings"); return -1; }
    char *pp = jsonschema_ptr_join(c, ptr, "properties");
    if (!pp) return -1;
    for (const cJSON *p = ps ? ps->child : NULL; p; p = p->next) {
        int i = 0;
        while (i < *n && strcmp((*props)[i].key, p->string) != 0) i++;
        if (i == *n) {
            if (*n == *cap) {
                int nc = *cap ? *cap * 2 : 8;
                prop *np = realloc(*props, (size_t)nc * sizeof *np);
                if (!np) { free(pp); jsonschema_fail(c, ptr, "out of memory"); return -1; }
                *props = np;
                *cap = nc;
            }
            (*props)[(*n)++] = (prop){p->string, p, NULL, 0};
        }
        free((*props)[i].ptr);
        (*props)[i].schema = p;
        if (!((*props)[i].ptr = jsonschema_ptr_join(c, pp, p->string))) { free(pp); return -1; }
    }
    free(pp);
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next) {
        if (!cJSON_IsString(r)) { jsonschema_fail(c, ptr, "'required' must be an array of strings"); return -1; }
        int i = 0;
        while (i < *n && strcmp((*props)[i].key, r->valuestring) != 0) i++;
        if (i == *n) { /* required but not described: any value */
            if (*n == *cap) {
                int nc = *cap ? *cap * 2 : 8;
                prop *np = realloc(*props, (size_t)nc * sizeof *np);
                if (!np) { jsonschema_fail(c, ptr, "out of memory"); return -1; }
                *props = np;
                *cap = nc;
            }
            static const cJSON any = {.type = cJSON_True};
            (*props)[(*n)++] = (prop){r->valuestring, &any, jsonschema_ptr_join(c, ptr, "required"), 0};
        }
        (*props)[i].required = 1;
    }
    return 0;
}

char *jsonschema_visit_object(jsonschema_conv *c, const cJSON *s, const char *name, const char *ptr) {
    prop *props = NULL;
    int n = 0, cap = 0;
    const cJSON *addl = NULL;
    char *res = NULL;
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(s, "allOf");
    if (all) {
        int i = 0;
        for (const cJSON *part = all->child; part; part = part->next, i++) {
            char *pp = jsonschema_ptr_index(c, ptr, "allOf", i);
            if (!pp) goto out;
            const cJSON *target = part;
            const cJSON *ref = cJSON_GetObjectItemCaseSensitive(part, "$ref");
            if (cJSON_IsString(ref) && !(target = jsonschema_resolve(c, ref->valuestring, pp))) { free(pp); goto out; }
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(target, "type");
            if (!cJSON_IsObject(target) || (t && !(cJSON_IsString(t) && strcmp(t->valuestring, "object") == 0)) ||
                cJSON_GetObjectItemCaseSensitive(target, "anyOf") || cJSON_GetObjectItemCaseSensitive(target, "oneOf") ||
                cJSON_GetObjectItemCaseSensitive(target, "allOf")) {
                jsonschema_fail(c, pp, "'allOf' can only combine object schemas (properties, required); hint: merge the parts by hand");
                free(pp);
                goto out;
            }
            int rc = collect_props(c, target, pp, &props, &n, &cap, &addl);
            free(pp);
            if (rc) goto out;
        }
    }
    if (collect_props(c, s, ptr, &props, &n, &cap, &addl)) goto out;
    if (addl && !cJSON_IsBool(addl) && !cJSON_IsObject(addl)) {
        jsonschema_fail(c, ptr, "'additionalProperties' must be a boolean or a schema");
        goto out;
    }
    res = build_object(c, props, n, addl, name, ptr);
out:
    for (int i = 0; i < n; i++) free(props[i].ptr);
    free(props);
    return res;
}

/* ---- arrays ---------------------------------------------------------------------------------- */

char *jsonschema_visit_array(jsonschema_conv *c, const cJSON *s, const char *name, const char *ptr) {
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
    const char *pk = prefix ? "prefixItems" : "items";
    if (!prefix && cJSON_IsArray(items)) prefix = items, items = NULL; /* draft 4-7 tuples */
    long min = jsonschema_count_kw(c, s, "minItems", ptr), max = jsonschema_count_kw(c, s, "maxItems", ptr);
    if (min == -2 || max == -2) return NULL;
    if (max >= 0 && min > max) return jsonschema_fail(c, ptr, "'minItems' %ld is above 'maxItems' %ld", min, max);
    if (prefix && !cJSON_IsArray(prefix)) return jsonschema_fail(c, ptr, "'%s' must be an array of schemas", pk);
    int n_prefix = prefix ? cJSON_GetArraySize(prefix) : 0;
    if (prefix && ((min >= 0 && n_prefix < min) || (max >= 0 && n_prefix > max)))
        return jsonschema_fail(c, ptr, "'%s' of %d items against minItems/maxItems: only tuples of exactly their "
                               "length are supported", pk, n_prefix);
    if (!prefix && cJSON_IsFalse(items) && min > 0)
        return jsonschema_fail(c, ptr, "'items': false with minItems %ld admits no array", min);
    jsonschema_need(c, "space");
    jsonschema_buf b = {0};
    jsonschema_buf_puts(&b, "\"[\" space");
    if (prefix) {
        int i = 0;
        for (const cJSON *it = prefix->child; it; it = it->next, i++) {
            char sub[200];
            snprintf(sub, sizeof sub, "%s-tuple-%d", name, i);
            char *pp = jsonschema_ptr_index(c, ptr, pk, i);
            char *v = pp ? jsonschema_visit(c, it, sub, pp) : NULL;
            free(pp);
            if (!v) { free(b.s); return NULL; }
            jsonschema_buf_printf(&b, "%s %s", i ? " \",\" space" : "", v);
            free(v);
        }
    } else {
        char *v;
        if (items && !cJSON_IsFalse(items)) {
            char sub[200];
            snprintf(sub, sizeof sub, "%s-item", name);
            char *pp = jsonschema_ptr_join(c, ptr, "items");
            v = pp ? jsonschema_visit(c, items, sub, pp) : NULL;
            free(pp);
        } else if (cJSON_IsFalse(items)) {
            max = 0;
            v = jsonschema_dup(c, "value");
        } else {
            jsonschema_need(c, "value");
            v = jsonschema_dup(c, "value");
        }
        if (!v) { free(b.s); return NULL; }
        if (max != 0) {
            /* item ("," item){min-1,max-1}, optional as a whole when min is 0 */
            jsonschema_buf rep = {0}, more = {0};
            jsonschema_buf_printf(&more, "( \",\" space %s )", v);
            jsonschema_buf_printf(&rep, "%s ", v);
            jsonschema_repeat(&rep, more.s ? more.s : "", min <= 0 ? 0 : min - 1, max < 0 ? -1 : max - 1);
            if (min <= 0) jsonschema_buf_printf(&b, " ( %s )?", rep.s ? rep.s : "");
            else jsonschema_buf_printf(&b, " %s", rep.s ? rep.s : "");
            free(rep.s);
            free(more.s);
        }
        free(v);
    }
    jsonschema_buf_puts(&b, " \"]\" space");
    return jsonschema_take(c, &b, ptr);
}
