/* The malformed-GGUF corpus: each case builds the bytes of a broken file and names the
 * substring the reader's message must contain. Shared by the generator (gen_malformed.c, for
 * the CLI tests and the fuzz seeds) and the unit test (test_gguf_malformed.c). */
#ifndef MGI_MALFORMED_CASES_H
#define MGI_MALFORMED_CASES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint8_t *p;
    size_t n, cap;
} mbuf;

static void mb_raw(mbuf *b, const void *p, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}
static void mb_u8(mbuf *b, uint8_t v) { mb_raw(b, &v, 1); }
static void mb_u32(mbuf *b, uint32_t v) { mb_raw(b, &v, 4); }
static void mb_u64(mbuf *b, uint64_t v) { mb_raw(b, &v, 8); }
static void mb_str(mbuf *b, const char *s) {
    mb_u64(b, strlen(s));
    mb_raw(b, s, strlen(s));
}
static void mb_header(mbuf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    mb_raw(b, "GGUF", 4);
    mb_u32(b, version);
    mb_u64(b, n_tensors);
    mb_u64(b, n_kv);
}
/* A key and its type tag; the caller writes the value. */
static void mb_key(mbuf *b, const char *key, uint32_t type) {
    mb_str(b, key);
    mb_u32(b, type);
}
static void mb_kv_u32(mbuf *b, const char *key, uint32_t v) {
    mb_key(b, key, 4);
    mb_u32(b, v);
}
static void mb_tensor(mbuf *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                      uint64_t offset) {
    mb_str(b, name);
    mb_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) mb_u64(b, ne[d]);
    mb_u32(b, type);
    mb_u64(b, offset);
}
static void mb_zeros(mbuf *b, size_t n) {
    static const uint8_t z[256];
    while (n) {
        size_t k = n > sizeof z ? sizeof z : n;
        mb_raw(b, z, k);
        n -= k;
    }
}
/* Pads to the default alignment 32 and appends n data bytes. */
static void mb_data(mbuf *b, size_t n) {
    mb_zeros(b, (32 - b->n % 32) % 32);
    mb_zeros(b, n);
}

/* A valid file whose every structural boundary is recorded: truncating it there must fail
 * with the recorded message. The first value is long so that truncated files still pass
 * the header's count checks and reach the field that is cut. */
#define MAX_CUTS 32
typedef struct {
    size_t at;
    const char *expect;
} mcut;

static size_t mb_base(mbuf *b, mcut *cuts) {
    size_t n = 0;
#define CUT(e) (cuts[n].at = b->n, cuts[n].expect = (e), n++)
    char longname[401];
    memset(longname, 'n', 400);
    longname[400] = '\0';
    mb_raw(b, "GG", 2);
    CUT("only 2 bytes long");
    mb_raw(b, "UF", 2);
    CUT("header: version needs 4 bytes");
    mb_u32(b, 3);
    CUT("header: tensor count needs 8 bytes");
    mb_u64(b, 2);
    CUT("header: metadata key count needs 8 bytes");
    mb_u64(b, 4);
    CUT("metadata key count 4 is impossible");
    mb_key(b, "general.name", 8);
    mb_u64(b, 400);
    mb_raw(b, longname, 200);
    CUT("key 'general.name': string has length 400");
    mb_raw(b, longname + 200, 200);
    CUT("metadata key 1: key needs 8 bytes");
    mb_u64(b, 5);
    mb_raw(b, "a.", 2);
    CUT("metadata key 1: key has length 5");
    mb_raw(b, "arr", 3);
    CUT("key 'a.arr': value type needs 4 bytes");
    mb_u32(b, 9);
    CUT("key 'a.arr': array element type needs 4 bytes");
    mb_u32(b, 4);
    CUT("key 'a.arr': array length needs 8 bytes");
    mb_u64(b, 3);
    mb_u32(b, 1);
    mb_u32(b, 2);
    mb_u32(b, 3);
    mb_key(b, "s.arr", 9);
    mb_u32(b, 8);
    mb_u64(b, 2);
    mb_str(b, "x");
    CUT("key 's.arr': array of 2 STRING elements needs at least 8 bytes");
    mb_str(b, "yz");
    mb_key(b, "b", 7);
    CUT("key 'b': value needs 1 bytes");
    mb_u8(b, 1);
    CUT("tensor info 0: name needs 8 bytes");
    mb_str(b, "w0");
    CUT("tensor 'w0': dimension count needs 4 bytes");
    mb_u32(b, 2);
    mb_u64(b, 8);
    CUT("tensor 'w0': dimension needs 8 bytes");
    mb_u64(b, 2);
    CUT("tensor 'w0': type needs 4 bytes");
    mb_u32(b, 0);
    CUT("tensor 'w0': data offset needs 8 bytes");
    mb_u64(b, 0);
    CUT("tensor info 1: name needs 8 bytes");
    mb_tensor(b, "w1", 1, (const uint64_t[]){32}, 8, 64);
    CUT("tensor 'w0': data [");
    mb_zeros(b, (32 - b->n % 32) % 32);
    mb_zeros(b, 64);
    CUT("tensor 'w1': data [");
    mb_zeros(b, 17);
    CUT("tensor 'w1': data [");
    mb_zeros(b, 17);
#undef CUT
    return n;
}

/* --- hand-made cases ------------------------------------------------------------------------------ */

typedef struct {
    const char *name;
    const char *expect;   /* substring of the reader's message */
    void (*build)(mbuf *b);
} mcase;

static void c_empty(mbuf *b) { (void)b; }
static void c_magic(mbuf *b) { mb_raw(b, "GGUX\3\0\0\0", 8); mb_zeros(b, 16); }
static void c_elf(mbuf *b) { mb_raw(b, "\x7f" "ELF\2\1\1\0", 8); mb_zeros(b, 64); }
static void c_v0(mbuf *b) { mb_header(b, 0, 0, 0); }
static void c_v1(mbuf *b) { mb_header(b, 1, 0, 0); }
static void c_v4(mbuf *b) { mb_header(b, 4, 0, 0); }
static void c_v99(mbuf *b) { mb_header(b, 99, 0, 0); }
static void c_vbe(mbuf *b) { mb_header(b, 0x03000000u, 0, 0); }
static void c_nkv62(mbuf *b) { mb_header(b, 3, 0, 1ull << 62); mb_zeros(b, 64); }
static void c_nkv63(mbuf *b) { mb_header(b, 3, 0, 1ull << 63); mb_zeros(b, 64); }
static void c_nkvmax(mbuf *b) { mb_header(b, 3, 0, UINT64_MAX); mb_zeros(b, 64); }
static void c_nt62(mbuf *b) { mb_header(b, 3, 1ull << 62, 0); mb_zeros(b, 64); }
static void c_nt63(mbuf *b) { mb_header(b, 3, 1ull << 63, 0); mb_zeros(b, 64); }
static void c_ntmax(mbuf *b) { mb_header(b, 3, UINT64_MAX, 1); mb_kv_u32(b, "k", 1); }
static void c_nt_plus(mbuf *b) { mb_header(b, 2, 3, 1); mb_kv_u32(b, "k", 1); mb_zeros(b, 64); }
static void c_keylen(mbuf *b) { mb_header(b, 3, 0, 1); mb_u64(b, 1ull << 40); mb_zeros(b, 16); }
static void c_keylenmax(mbuf *b) { mb_header(b, 3, 0, 1); mb_u64(b, UINT64_MAX); mb_zeros(b, 16); }
static void c_key0(mbuf *b) { mb_header(b, 3, 0, 1); mb_u64(b, 0); mb_u32(b, 4); mb_u32(b, 1); mb_zeros(b, 8); }
static void c_keynul(mbuf *b) { mb_header(b, 3, 0, 1); mb_u64(b, 3); mb_raw(b, "a\0b", 3); mb_u32(b, 4); mb_u32(b, 1); }
static void c_strlen(mbuf *b) { mb_header(b, 3, 0, 1); mb_key(b, "s", 8); mb_u64(b, 1000); mb_raw(b, "abc", 3); }
static void c_strlenmax(mbuf *b) { mb_header(b, 3, 0, 1); mb_key(b, "s", 8); mb_u64(b, UINT64_MAX); mb_raw(b, "abc", 3); }
static void c_vtype13(mbuf *b) { mb_header(b, 3, 0, 1); mb_key(b, "k", 13); mb_u32(b, 1); mb_zeros(b, 8); }
static void c_vtype31(mbuf *b) { mb_header(b, 3, 0, 1); mb_key(b, "k", 1u << 31); mb_u32(b, 1); mb_zeros(b, 8); }
static void c_etype(mbuf *b) { mb_header(b, 3, 0, 1); mb_key(b, "k", 9); mb_u32(b, 13); mb_u64(b, 1); mb_zeros(b, 8); }
static void c_deep(mbuf *b) {
    mb_header(b, 3, 0, 1);
    mb_key(b, "deep", 9);
    for (int i = 0; i < 9; i++) { mb_u32(b, 9); mb_u64(b, 1); }
    mb_u32(b, 4);
    mb_u64(b, 0);
}
static void c_arr_huge(mbuf *b) { mb_header(b, 3, 0, 1); mb_key(b, "k", 9); mb_u32(b, 4); mb_u64(b, 1ull << 62); mb_zeros(b, 64); }
static void c_arr_max(mbuf *b) { mb_header(b, 3, 0, 1); mb_key(b, "k", 9); mb_u32(b, 10); mb_u64(b, UINT64_MAX); mb_zeros(b, 64); }
static void c_arr_str_huge(mbuf *b) { mb_header(b, 3, 0, 1); mb_key(b, "k", 9); mb_u32(b, 8); mb_u64(b, 1ull << 61); mb_zeros(b, 64); }
static void c_arr_arr_huge(mbuf *b) { mb_header(b, 3, 0, 1); mb_key(b, "k", 9); mb_u32(b, 9); mb_u64(b, 1ull << 60); mb_zeros(b, 64); }
static void c_arr_strlen(mbuf *b) {
    mb_header(b, 3, 0, 1); mb_key(b, "toks", 9); mb_u32(b, 8); mb_u64(b, 2);
    mb_str(b, "ok"); mb_u64(b, 1ull << 50); mb_zeros(b, 8);
}
static void c_bool2(mbuf *b) { mb_header(b, 3, 0, 1); mb_key(b, "flag", 7); mb_u8(b, 2); mb_zeros(b, 8); }
static void c_bool_arr(mbuf *b) { mb_header(b, 3, 0, 1); mb_key(b, "flags", 9); mb_u32(b, 7); mb_u64(b, 3); mb_raw(b, "\1\2\0", 3); }
static void c_dupkey(mbuf *b) { mb_header(b, 3, 0, 2); mb_kv_u32(b, "a.b", 1); mb_kv_u32(b, "a.b", 2); }
static void c_align0(mbuf *b) { mb_header(b, 3, 0, 1); mb_kv_u32(b, "general.alignment", 0); }
static void c_align3(mbuf *b) { mb_header(b, 3, 0, 1); mb_kv_u32(b, "general.alignment", 3); }
static void c_align_u64(mbuf *b) { mb_header(b, 3, 0, 1); mb_key(b, "general.alignment", 10); mb_u64(b, 32); }
static void c_align_str(mbuf *b) { mb_header(b, 3, 0, 1); mb_key(b, "general.alignment", 8); mb_str(b, "32"); }

/* One tensor info (of n_dims dims, type, offset) and 64 bytes of data. */
static void one_tensor(mbuf *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t off) {
    mb_header(b, 3, 1, 0);
    mb_tensor(b, name, n_dims, ne, type, off);
    mb_data(b, 64);
}
static void c_ndims0(mbuf *b) { one_tensor(b, "t", 0, NULL, 0, 0); }
static void c_ndims5(mbuf *b) { one_tensor(b, "t", 5, (const uint64_t[]){1, 1, 1, 1, 1}, 0, 0); }
static void c_dim0(mbuf *b) { one_tensor(b, "t", 2, (const uint64_t[]){4, 0}, 0, 0); }
static void c_dim63(mbuf *b) { one_tensor(b, "t", 1, (const uint64_t[]){1ull << 63}, 0, 0); }
static void c_dimprod(mbuf *b) { one_tensor(b, "t", 3, (const uint64_t[]){1ull << 32, 1ull << 31, 2}, 0, 0); }
static void c_bytes_ovf(mbuf *b) { one_tensor(b, "t", 1, (const uint64_t[]){1ull << 62}, 28, 0); }
static void c_type4(mbuf *b) { one_tensor(b, "blk.0.attn_q.weight", 1, (const uint64_t[]){32}, 4, 0); }
static void c_type99(mbuf *b) { one_tensor(b, "t", 1, (const uint64_t[]){32}, 99, 0); }
static void c_type31(mbuf *b) { one_tensor(b, "t", 1, (const uint64_t[]){32}, 1u << 31, 0); }
static void c_block(mbuf *b) { one_tensor(b, "t", 2, (const uint64_t[]){33, 1}, 2, 0); }
static void c_misaligned(mbuf *b) { one_tensor(b, "t", 1, (const uint64_t[]){4}, 0, 4); }
static void c_past_end(mbuf *b) { one_tensor(b, "blk.0.attn_q.weight", 1, (const uint64_t[]){32}, 0, 0); }
static void c_off_huge(mbuf *b) { one_tensor(b, "t", 1, (const uint64_t[]){4}, 0, 1ull << 63); }
static void c_off_max(mbuf *b) { one_tensor(b, "t", 1, (const uint64_t[]){4}, 0, UINT64_MAX - 31); }
static void c_name64(mbuf *b) {
    char name[65];
    memset(name, 'x', 64);
    name[64] = '\0';
    one_tensor(b, name, 1, (const uint64_t[]){4}, 0, 0);
}
static void c_name0(mbuf *b) { one_tensor(b, "", 1, (const uint64_t[]){4}, 0, 0); }
static void c_namelen(mbuf *b) { mb_header(b, 3, 1, 0); mb_u64(b, 1ull << 40); mb_zeros(b, 64); }
static void c_overlap(mbuf *b) {
    mb_header(b, 3, 2, 0);
    mb_tensor(b, "a", 1, (const uint64_t[]){16}, 0, 0);
    mb_tensor(b, "b", 1, (const uint64_t[]){16}, 0, 32);
    mb_data(b, 128);
}
static void c_same_offset(mbuf *b) {
    mb_header(b, 3, 2, 0);
    mb_tensor(b, "a", 1, (const uint64_t[]){8}, 0, 0);
    mb_tensor(b, "b", 1, (const uint64_t[]){8}, 0, 0);
    mb_data(b, 64);
}
static void c_dupname(mbuf *b) {
    mb_header(b, 3, 2, 0);
    mb_tensor(b, "w", 1, (const uint64_t[]){8}, 0, 0);
    mb_tensor(b, "w", 1, (const uint64_t[]){8}, 0, 32);
    mb_data(b, 64);
}
static void c_align_data(mbuf *b) {
    /* general.alignment 64 makes offset 32 misaligned even though 32 is the default. */
    mb_header(b, 3, 1, 1);
    mb_kv_u32(b, "general.alignment", 64);
    mb_tensor(b, "t", 1, (const uint64_t[]){8}, 0, 32);
    mb_data(b, 128);
}

static const mcase malformed_cases[] = {
    {"empty", "is empty (0 bytes)", c_empty},
    {"bad-magic", "not a GGUF file", c_magic},
    {"elf-file", "starts with bytes 7f 45 4c 46", c_elf},
    {"version-0", "unknown GGUF version 0", c_v0},
    {"version-1", "GGUF version 1 is not supported", c_v1},
    {"version-4", "unknown GGUF version 4", c_v4},
    {"version-99", "unknown GGUF version 99", c_v99},
    {"big-endian", "big-endian", c_vbe},
    {"n-kv-2e62", "metadata key count 4611686018427387904 is impossible", c_nkv62},
    {"n-kv-2e63", "metadata key count 9223372036854775808 is impossible", c_nkv63},
    {"n-kv-max", "metadata key count 18446744073709551615 is impossible", c_nkvmax},
    {"n-tensors-2e62", "tensor count 4611686018427387904 is impossible", c_nt62},
    {"n-tensors-2e63", "tensor count 9223372036854775808 is impossible", c_nt63},
    {"n-tensors-max", "tensor count 18446744073709551615 is impossible", c_ntmax},
    {"n-tensors-too-many", "tensor count 3 is impossible", c_nt_plus},
    {"key-length-past-end", "key has length 1099511627776", c_keylen},
    {"key-length-max", "key has length 18446744073709551615", c_keylenmax},
    {"key-length-0", "metadata key 0 has an empty name", c_key0},
    {"key-with-nul", "metadata key 0 contains a NUL byte", c_keynul},
    {"string-past-end", "key 's': string has length 1000", c_strlen},
    {"string-length-max", "key 's': string has length 18446744073709551615", c_strlenmax},
    {"value-type-13", "key 'k': value type 13 is not a GGUF value type", c_vtype13},
    {"value-type-2e31", "value type 2147483648 is not a GGUF value type", c_vtype31},
    {"array-elem-type-13", "array element type 13 is not a GGUF value type", c_etype},
    {"arrays-too-deep", "key 'deep': arrays nested deeper than 8", c_deep},
    {"array-count-2e62", "array of 4611686018427387904 UINT32 elements", c_arr_huge},
    {"array-count-max", "array of 18446744073709551615 UINT64 elements", c_arr_max},
    {"string-array-count-huge", "array of 2305843009213693952 STRING elements", c_arr_str_huge},
    {"array-array-count-huge", "array of 1152921504606846976 ARRAY elements", c_arr_arr_huge},
    {"string-element-past-end", "key 'toks': string element 1 has length", c_arr_strlen},
    {"bool-2", "key 'flag': bool value 2 is neither 0 nor 1", c_bool2},
    {"bool-array-2", "key 'flags': element 1: bool value 2", c_bool_arr},
    {"duplicate-key", "duplicate metadata key 'a.b'", c_dupkey},
    {"alignment-0", "'general.alignment' is 0; it must be a nonzero power of two", c_align0},
    {"alignment-3", "'general.alignment' is 3; it must be a nonzero power of two", c_align3},
    {"alignment-u64", "'general.alignment' has type UINT64; it must be UINT32", c_align_u64},
    {"alignment-string", "'general.alignment' has type STRING", c_align_str},
    {"n-dims-0", "tensor 't': n_dims is 0", c_ndims0},
    {"n-dims-5", "tensor 't': n_dims is 5", c_ndims5},
    {"dim-zero", "tensor 't': dimension 1 is 0", c_dim0},
    {"dim-2e63", "tensor 't': dimension 0 is 9223372036854775808", c_dim63},
    {"dims-product-overflow", "tensor 't': element count overflows", c_dimprod},
    {"byte-size-overflow", "tensor 't': byte size overflows", c_bytes_ovf},
    {"type-4", "tensor 'blk.0.attn_q.weight': unknown type id 4", c_type4},
    {"type-99", "tensor 't': unknown type id 99", c_type99},
    {"type-2e31", "tensor 't': unknown type id 2147483648", c_type31},
    {"ne0-not-block-multiple", "ne[0] = 33 is not a multiple of the Q4_0 block size 32", c_block},
    {"offset-misaligned", "tensor 't': data offset 4 is not a multiple of the alignment 32", c_misaligned},
    {"offset-misaligned-64", "data offset 32 is not a multiple of the alignment 64", c_align_data},
    {"data-past-end", "tensor 'blk.0.attn_q.weight': data [96, 224) runs past the end of the file (size 160)", c_past_end},
    {"offset-2e63", "runs past the end of the file", c_off_huge},
    {"offset-max", "runs past the end of the file", c_off_max},
    {"tensor-name-64", "is 64 bytes long; the limit is 63", c_name64},
    {"tensor-name-empty", "tensor 0 has an empty name", c_name0},
    {"tensor-name-past-end", "tensor info 0: name has length 1099511627776", c_namelen},
    {"tensors-overlap", "tensors 'a' [0, 64) and 'b' [32, 96) overlap", c_overlap},
    {"tensors-same-offset", "overlap", c_same_offset},
    {"duplicate-tensor", "duplicate tensor name 'w'", c_dupname},
};
#define N_MALFORMED_CASES (sizeof malformed_cases / sizeof malformed_cases[0])

#endif
