/* BPE pre-tokenizers: every tokenizer.ggml.pre that llama.cpp accepts, each a row of regexes
 * written as llama.cpp writes them (src/llama-vocab.cpp), compiled once at load by PCRE2
 * (UTF + UCP, JIT where available) and applied in order: each regex cuts every piece that the
 * previous one left, and the text between matches stays a piece of its own.
 * Where this can still differ from llama.cpp: letter/number/space classes come from PCRE2's
 * Unicode tables (Debian 12's 10.42: Unicode 14), llama.cpp's from its own newer ones, so
 * characters assigned since differ; and llama.cpp's hand-written GPT-2 and Llama 3 splitters
 * give each unassigned code point a piece of its own where the regex joins it to its neighbours
 * (a different id only where a merge crosses that boundary). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/tokenizer_internal.h"
#include "engine/unicode.h"

/* ---- the regex rows -------------------------------------------------------------------------- */

/* llama.cpp's hand-coded splitters for these two also match \s+ at the end; the trailing |\s+
 * of the tokenizer.json originals says so here. */
#define RX_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
/* (?i:'s|...) spelt out: PCRE2's caseless match would also take "'ſ" (U+017F) for "'s". */
#define RX_CONTRACT "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RX_LLAMA3                                                                                   \
    RX_CONTRACT "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"        \
                "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_QWEN2                                                                                    \
    RX_CONTRACT "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|" \
                "\\s+(?!\\S)|\\s+"
/* o200k's [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+ as llama.cpp runs it:
 * ((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+, i.e. "a letter but a-z" then "a letter but
 * A-Z" (every other letter counts as both, marks as neither). The same sets as single classes,
 * which PCRE2 repeats without a stack frame per character. */
#define RX_UPPER "[^\\P{L}a-z]"
#define RX_LOWER "[^\\P{L}A-Z]"
#define RX_O200K_TAIL "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_GPT4O                                                                                     \
    "[^\\r\\n\\p{L}\\p{N}]?" RX_UPPER "*" RX_LOWER "+" RX_CONTRACT "?|[^\\r\\n\\p{L}\\p{N}]?" RX_UPPER \
    "+" RX_LOWER "*" RX_CONTRACT "?|\\p{N}{1,3}" RX_O200K_TAIL
#define RX_ASCII_PUNCT_WORD "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+"
#define RX_CJK_KANA "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+"
#define RX_DEEPSEEK_CJK "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"
#define RX_BLOOM " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{0964}\\x{06D4}\\x{060C})]+"

static const char *const row_gpt2[] = {RX_GPT2, NULL};
static const char *const row_digit_gpt2[] = {"\\p{N}", RX_GPT2, NULL};
static const char *const row_default[] = {"[\\p{P}\\$\\+<=>\\^~\\|]+", RX_GPT2, "\\p{N}+", "[0-9][0-9][0-9]", NULL};
static const char *const row_falcon[] = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RX_GPT2, "[0-9][0-9][0-9]", NULL};
static const char *const row_llama3[] = {RX_LLAMA3, NULL};
static const char *const row_jais2[] = {
    RX_CONTRACT "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|"
    "\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}", NULL};
static const char *const row_qwen2[] = {RX_QWEN2, NULL};
static const char *const row_qwen35[] = {
    RX_CONTRACT "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", NULL};
static const char *const row_bailingmoe[] = {
    "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+", NULL};
static const char *const row_seed_coder[] = {
    RX_CONTRACT "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+", NULL};
static const char *const row_ufakzeka[] = {
    "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", NULL};
static const char *const row_laguna[] = {"[^\\n]+|[\\n]+", RX_QWEN2, NULL};
static const char *const row_minicpm5[] = {
    "\\p{N}{1,3}",
    RX_CONTRACT "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+", NULL};
static const char *const row_exaone_moe[] = {
    RX_CONTRACT "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+", NULL};
static const char *const row_gpt4o[] = {RX_GPT4O, NULL};
static const char *const row_tekken[] = {
    "[^\\r\\n\\p{L}\\p{N}]?" RX_UPPER "*" RX_LOWER "+|[^\\r\\n\\p{L}\\p{N}]?" RX_UPPER "+" RX_LOWER "*|\\p{N}"
    RX_O200K_TAIL, NULL};
/* As gpt-4o with marks joining their letters: a letter or mark but a-z, a letter or mark but A-Z. */
static const char *const row_granite_multi[] = {
    "[^\\r\\n\\p{L}\\p{N}]?(?:" RX_UPPER "|\\p{M})*(?:" RX_LOWER "|\\p{M})+" RX_CONTRACT "?|"
    "[^\\r\\n\\p{L}\\p{N}]?(?:" RX_UPPER "|\\p{M})+(?:" RX_LOWER "|\\p{M})*" RX_CONTRACT "?|\\p{N}{1,3}"
    RX_O200K_TAIL, NULL};
/* Digits in threes counted from the right, as a match (tiny_aya, the run not followed by a word
 * character) or as the places between groups (superbpe). PCRE2 rescans the rest of the run from
 * every place, which is quadratic: 100 KB of digits took 4.6 s (tiny_aya) and 81 s (superbpe),
 * so split_digits() below does these two in one pass; the strings stay as the rows' text. */
#define RX_DIGITS_3_WORD "[0-9]{1,3}(?=(?:[0-9]{3})*(?![0-9A-Za-z_]))"
#define RX_DIGITS_3_SPLIT "(?=([0-9]{3})+(?![0-9]))"

/* tiny_aya's \p{Lu}... classes reach llama.cpp as plain letter classes (it has no letter case
 * categories), so [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+ is [\p{L}\p{M}]+;
 * its \d and \b are std::wregex's ASCII ones. */
static const char *const row_tiny_aya[] = {
    RX_DIGITS_3_WORD,
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+" RX_CONTRACT "?|\\p{N}{1,3}" RX_O200K_TAIL, NULL};
static const char *const row_youtu[] = {
    "[\\x{AC00}-\\x{D7A3}\\x{3131}-\\x{318E}]+|[\\x{FF01}\\x{2026}\\x{201C}\\x{201D}\\x{2018}\\x{2019}"
    "\\x{2014}\\x{FF1A}\\x{FF1B}\\x{FF0C}\\x{3001}-\\x{303F}\\x{FE30}-\\x{FE4F}]+|[\\x{3105}-\\x{312F}]+|"
    RX_CJK_KANA,
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+" RX_CONTRACT "?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", NULL};
/* Kimi K2: llama.cpp runs its own splitter, whose Han set is these ranges and whose words are
 * letters that are not Han (marks not included), with an optional contraction. */
#define RX_K2_HAN                                                                                   \
    "\\x{4E00}-\\x{9FFF}\\x{3400}-\\x{4DBF}\\x{20000}-\\x{2A6DF}\\x{2A700}-\\x{2B73F}\\x{2B740}-"        \
    "\\x{2B81F}\\x{2B820}-\\x{2CEAF}\\x{2CEB0}-\\x{2EBEF}\\x{F900}-\\x{FAFF}\\x{2F800}-\\x{2FA1F}"
static const char *const row_kimi_k2[] = {
    "[" RX_K2_HAN "]+|[^\\r\\n\\p{L}\\p{N}]?(?:(?![" RX_K2_HAN "])\\p{L})+" RX_CONTRACT "?|\\p{N}{1,3}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", NULL};
static const char *const row_deepseek_llm[] = {
    "[\\r\\n]",
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}"
    "\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}"
    "\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}"
    "\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}"
    "\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}"
    "\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-"
    "\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}"
    "\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}"
    "\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}"
    "\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}"
    "\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}"
    "\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}"
    "\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}"
    "\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-"
    "\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+",
    "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
    "\\s+$",
    RX_DEEPSEEK_CJK,
    "\\p{N}+", NULL};
static const char *const row_deepseek_coder[] = {
    "[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RX_DEEPSEEK_CJK, "\\p{N}", NULL};
static const char *const row_deepseek3[] = {
    "\\p{N}{1,3}", RX_CJK_KANA,
    RX_ASCII_PUNCT_WORD "|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+",
    NULL};
static const char *const row_spark2_5[] = {
    "\\p{N}{1,3}", RX_CJK_KANA,
    RX_ASCII_PUNCT_WORD "|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\\r\\n]|\\s+(?!\\S)|\\s+",
    "\\p{N}", NULL};
/* AFMoE: llama.cpp's own digit splitter gives a run of n digits its first n % 3 digits, then
 * threes; here the run is cut out first and split the same way. */
static const char *const row_afmoe[] = {
    "\\p{N}+", "^\\p{N}{1,2}(?=(?:\\p{N}{3})+$)|\\p{N}{3}",
    "[\\x{4E00}-\\x{9FFF}\\x{3400}-\\x{4DBF}\\x{F900}-\\x{FAFF}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}"
    "\\x{FF65}-\\x{FF9F}\\x{2F00}-\\x{2FDF}\\x{0E00}-\\x{0E7F}\\x{0E80}-\\x{0EFF}\\x{1780}-\\x{17FF}"
    "\\x{1000}-\\x{109F}\\x{AA60}-\\x{AA7F}\\x{A9E0}-\\x{A9FF}\\x{AC00}-\\x{D7AF}\\x{1100}-\\x{11FF}]+",
    RX_ASCII_PUNCT_WORD "|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+",
    NULL};
static const char *const row_bloom[] = {RX_BLOOM, NULL};
static const char *const row_viking[] = {RX_BLOOM, "\\p{N}", NULL};
static const char *const row_chameleon[] = {
    "<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", "\\p{N}",
    "[\\p{P}!-/:-@\\[-`{-~]", RX_GPT2, NULL};
/* std::wregex's \d is ASCII. */
static const char *const row_superbpe[] = {"\\p{N}+", RX_DIGITS_3_SPLIT, NULL};
/* SentencePiece-style BPE over raw UTF-8 (spaces already U+2581): only newlines cut. */
static const char *const row_lines[] = {"[^\\n]+|[\\n]+", NULL};

/* What a pre-tokenizer changes besides its regexes (llama.cpp's per-name settings). */
enum {
    PRE_IGNORE_MERGES = 1,  /* a whole piece that is a token skips the merges */
    PRE_ADD_BOS = 2,        /* add_bos defaults to true */
    PRE_KEEP_SPACES = 4,    /* clean_spaces off: detokenising leaves " ," and " 's" alone */
    PRE_NO_BOS = 8,         /* no default BOS id */
    PRE_RAW_UTF8 = 16,      /* spaces become U+2581, merges run on UTF-8, bytes as <0xNN> */
    PRE_FORCE_BOS = 32,     /* add_bos whatever the file says (llama.cpp's gemma4 workaround) */
};

static const tok_pre_entry pre_table[] = {
    {"default", row_default, 0},
    {"gpt-2", row_gpt2, 0}, {"phi-2", row_gpt2, 0}, {"jina-es", row_gpt2, 0}, {"jina-de", row_gpt2, 0},
    {"gigachat", row_gpt2, 0}, {"jina-v2-es", row_gpt2, 0}, {"jina-v2-de", row_gpt2, 0},
    {"a.x-4.0", row_gpt2, 0}, {"mellum", row_gpt2, 0}, {"modern-bert", row_gpt2, 0},
    {"mpt", row_gpt2, 0}, {"olmo", row_gpt2, 0}, {"jais", row_gpt2, 0}, {"exaone4", row_gpt2, 0},
    {"trillion", row_gpt2, PRE_KEEP_SPACES}, {"granite-docling", row_gpt2, PRE_KEEP_SPACES},
    {"starcoder", row_digit_gpt2, 0}, {"refact", row_digit_gpt2, 0}, {"codeshell", row_digit_gpt2, 0},
    {"exaone", row_digit_gpt2, 0}, {"minerva-7b", row_digit_gpt2, 0}, {"mellum2", row_digit_gpt2, 0},
    {"command-r", row_digit_gpt2, PRE_KEEP_SPACES}, {"smollm", row_digit_gpt2, PRE_KEEP_SPACES},
    {"falcon", row_falcon, 0},
    {"llama3", row_llama3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"llama-v3", row_llama3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"llama-bpe", row_llama3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"falcon3", row_llama3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"falcon-h1", row_llama3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"pixtral", row_llama3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"midm-2.0", row_llama3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"lfm2", row_llama3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"jina-v5-nano", row_llama3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"dbrx", row_llama3, 0}, {"smaug-bpe", row_llama3, 0},
    {"chatglm-bpe", row_llama3, PRE_NO_BOS}, {"glm4", row_llama3, PRE_NO_BOS},
    {"jais-2", row_jais2, 0},
    {"qwen2", row_qwen2, PRE_KEEP_SPACES}, {"deepseek-r1-qwen", row_qwen2, PRE_KEEP_SPACES},
    {"kormo", row_qwen2, PRE_KEEP_SPACES}, {"f2llmv2", row_qwen2, PRE_KEEP_SPACES},
    {"megrez", row_qwen2, 0}, {"stablelm2", row_qwen2, 0},
    {"hunyuan", row_qwen2, PRE_KEEP_SPACES}, {"solar-open", row_qwen2, PRE_KEEP_SPACES},
    {"grok-2", row_qwen2, PRE_KEEP_SPACES},
    {"qwen35", row_qwen35, PRE_KEEP_SPACES},
    {"bailingmoe", row_bailingmoe, PRE_KEEP_SPACES}, {"bailingmoe2", row_bailingmoe, PRE_KEEP_SPACES},
    {"llada-moe", row_bailingmoe, PRE_KEEP_SPACES},
    {"seed-coder", row_seed_coder, PRE_KEEP_SPACES},
    {"ufakzeka", row_ufakzeka, PRE_KEEP_SPACES},
    {"laguna", row_laguna, PRE_KEEP_SPACES},
    {"minicpm5", row_minicpm5, PRE_IGNORE_MERGES},
    {"exaone-moe", row_exaone_moe, 0},
    {"gpt-4o", row_gpt4o, PRE_KEEP_SPACES}, {"llama4", row_gpt4o, PRE_KEEP_SPACES},
    {"kanana2", row_gpt4o, PRE_KEEP_SPACES}, {"talkie", row_gpt4o, PRE_KEEP_SPACES},
    {"minimax-m2", row_gpt4o, PRE_KEEP_SPACES},
    {"tekken", row_tekken, PRE_KEEP_SPACES | PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"granite-embed-multi-97m", row_granite_multi, PRE_KEEP_SPACES | PRE_IGNORE_MERGES},
    {"tiny_aya", row_tiny_aya, PRE_KEEP_SPACES}, {"cohere2moe", row_tiny_aya, PRE_KEEP_SPACES},
    {"youtu", row_youtu, PRE_KEEP_SPACES | PRE_IGNORE_MERGES},
    {"kimi-k2", row_kimi_k2, PRE_KEEP_SPACES},
    {"deepseek-llm", row_deepseek_llm, PRE_KEEP_SPACES},
    {"deepseek-coder", row_deepseek_coder, PRE_KEEP_SPACES},
    {"deepseek-v3", row_deepseek3, PRE_KEEP_SPACES}, {"hunyuan-dense", row_deepseek3, PRE_KEEP_SPACES},
    {"joyai-llm", row_deepseek3, PRE_KEEP_SPACES}, {"hy_v4", row_deepseek3, PRE_KEEP_SPACES},
    {"spark2_5", row_spark2_5, PRE_KEEP_SPACES},
    {"afmoe", row_afmoe, PRE_KEEP_SPACES},
    {"bloom", row_bloom, 0}, {"gpt3-finnish", row_bloom, 0}, {"poro-chat", row_bloom, PRE_KEEP_SPACES},
    {"viking", row_viking, PRE_KEEP_SPACES},
    {"chameleon", row_chameleon, PRE_ADD_BOS | PRE_KEEP_SPACES},
    {"superbpe", row_superbpe, PRE_KEEP_SPACES},
    {"gemma4", row_lines, PRE_RAW_UTF8 | PRE_FORCE_BOS},
    {"granite-embed-multi-311m", row_lines, PRE_RAW_UTF8 | PRE_FORCE_BOS},
    {"sarvam-moe", row_lines, PRE_RAW_UTF8 | PRE_KEEP_SPACES},
};

const tok_pre_entry *tok_pre_find(const char *name) {
    for (size_t i = 0; i < sizeof pre_table / sizeof pre_table[0]; i++)
        if (!strcmp(pre_table[i].name, name)) return &pre_table[i];
    return NULL;
}

size_t tok_pre_list(char *out, size_t cap) {
    /* one name per regex row: the full list does not fit an error line */
    size_t o = 0, n = sizeof pre_table / sizeof pre_table[0];
    if (cap) out[0] = 0;
    for (size_t i = 0; i < n; i++) {
        bool first = true;
        for (size_t j = 0; j < i && first; j++) first = pre_table[j].rx != pre_table[i].rx;
        if (!first) continue;
        int k = snprintf(o < cap ? out + o : NULL, o < cap ? cap - o : 0, "%s%s", o ? ", " : "",
                         pre_table[i].name);
        if (k > 0) o += (size_t)k;
    }
    int k = snprintf(o < cap ? out + o : NULL, o < cap ? cap - o : 0, " (and %zu more names of the same rows)",
                     n - tok_pre_families());
    if (k > 0) o += (size_t)k;
    return o;
}

size_t tok_pre_families(void) {
    size_t n = sizeof pre_table / sizeof pre_table[0], f = 0;
    for (size_t i = 0; i < n; i++) {
        bool first = true;
        for (size_t j = 0; j < i && first; j++) first = pre_table[j].rx != pre_table[i].rx;
        f += first;
    }
    return f;
}

void tok_pre_settings(const tok_pre_entry *e, tokenizer *t) {
    t->ignore_merges = e->flags & PRE_IGNORE_MERGES;
    t->add_bos = e->flags & PRE_ADD_BOS;
    t->clean_spaces = !(e->flags & PRE_KEEP_SPACES);
    t->raw_utf8 = e->flags & PRE_RAW_UTF8;
    t->force_bos = e->flags & PRE_FORCE_BOS;
    if (e->flags & PRE_NO_BOS) t->bos = -1;
}

/* ---- compiling ------------------------------------------------------------------------------- */

/* \s and \S as Unicode's White_Space, the set llama.cpp splits on: PCRE2's \s also takes
 * U+180E, which Unicode 6.3 moved out of White_Space. Writes the rewritten pattern to out. */
static int rewrite_spaces(const char *rx, char *out, size_t cap) {
    size_t o = 0;
    for (const char *p = rx; *p; p++) {
        const char *add = NULL;
        char one[3] = {p[0], 0, 0};
        if (p[0] == '\\' && p[1]) {
            add = p[1] == 's' ? "\\p{WSpace}" : p[1] == 'S' ? "\\P{WSpace}" : (one[1] = p[1], one);
            p++;
        } else {
            add = one;
        }
        size_t k = strlen(add);
        if (o + k >= cap) return -1;
        memcpy(out + o, add, k);
        o += k;
    }
    out[o] = 0;
    return 0;
}

int tok_pre_compile(tokenizer *t, char *err, size_t err_size) {
    const char *const *rx = t->pre_entry->rx;
    t->n_rx = 0;
    for (; rx[t->n_rx]; t->n_rx++) {
        if (t->n_rx == TOK_MAX_RX) {
            snprintf(err, err_size, "pre-tokenizer '%s': more than %d regexes", t->pre_name, TOK_MAX_RX);
            return -1;
        }
        t->rx_digits[t->n_rx] = !strcmp(rx[t->n_rx], RX_DIGITS_3_WORD) ? DIGITS_WORD
                                : !strcmp(rx[t->n_rx], RX_DIGITS_3_SPLIT) ? DIGITS_SPLIT : 0;
        t->rx[t->n_rx] = NULL;
        if (t->rx_digits[t->n_rx]) continue;
        char pattern[4096];
        if (rewrite_spaces(rx[t->n_rx], pattern, sizeof pattern)) {
            snprintf(err, err_size, "pre-tokenizer '%s': regex %d is too long", t->pre_name, t->n_rx);
            return -1;
        }
        int code;
        PCRE2_SIZE at;
        /* DOLLAR_ENDONLY: $ is the end of the piece, as in std::regex, not also before a last \n */
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                                       PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK | PCRE2_DOLLAR_ENDONLY,
                                       &code, &at, NULL);
        if (!re) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(code, msg, sizeof msg);
            snprintf(err, err_size, "pre-tokenizer '%s': regex %d does not compile at offset %zu: %s",
                     t->pre_name, t->n_rx, (size_t)at, (const char *)msg);
            return -1;
        }
        t->rx[t->n_rx] = re;
        /* JIT is an optimisation: where the platform has none, the interpreter runs the same regex */
        (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    }
    return 0;
}

void tok_pre_free(tokenizer *t) {
    for (int i = 0; i < t->n_rx; i++) pcre2_code_free(t->rx[i]);   /* NULL is a no-op */
    t->n_rx = 0;
}

/* ---- splitting ------------------------------------------------------------------------------- */

static int spans_push(tok_spans *s, size_t off, size_t len) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        tok_span *ns = realloc(s->s, cap * sizeof *ns);
        if (!ns) return -1;
        s->s = ns;
        s->cap = cap;
    }
    s->s[s->n++] = (tok_span){off, len};
    return 0;
}

/* Byte length of the UTF-8 character at s (valid text). */
static size_t char_len(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

/* Cuts one piece [off, off+len) of text with re, appending matches and the text between them. */
static int split_piece(const pcre2_code *re, const char *text, size_t off, size_t len, pcre2_match_data *md,
                       pcre2_match_context *mc, tok_spans *out, char *err, size_t err_size) {
    const PCRE2_SPTR subject = (PCRE2_SPTR)(text + off);
    size_t pos = 0, prev = 0;   /* search from pos; text before prev is already out */
    uint32_t opts = 0;
    while (pos <= len) {
        int rc = pcre2_match(re, subject, len, pos, opts | PCRE2_NO_UTF_CHECK, md, mc);
        if (rc == PCRE2_ERROR_NOMATCH) {
            if (!opts) break;
            /* no non-empty match right after an empty one: move one character on */
            if (pos >= len) break;
            pos += char_len(subject[pos]);
            opts = 0;
            continue;
        }
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            snprintf(err, err_size, "pre-tokenizer regex failed on a piece of %zu bytes: %s (hint: split the "
                     "text into shorter lines)", len, (const char *)msg);
            return -1;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t s = ov[0], e = ov[1];
        if (s > prev && spans_push(out, off + prev, s - prev)) goto oom;
        if (e > s && spans_push(out, off + s, e - s)) goto oom;
        prev = pos = e;
        /* after an empty match, try a non-empty one at the same place before moving on */
        opts = e == s ? PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED : 0;
    }
    if (prev < len && spans_push(out, off + prev, len - prev)) goto oom;
    return 0;
oom:
    snprintf(err, err_size, "out of memory while pre-tokenizing %zu bytes", len);
    return -1;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* The two digit regexes in one pass over a piece (see RX_DIGITS_3_*). Each maximal run of ASCII
 * digits [a, e) has its group places at e - 3k (k >= 1, not before a). DIGITS_WORD: the groups
 * are matches, the first one the first (e - a) % 3 digits, unless a word character follows the
 * run (then \b never holds and the run stays in the text between matches); DIGITS_SPLIT: the
 * places cut the piece, as the empty matches of the lookahead do. */
static int split_digits(int mode, const char *text, size_t off, size_t len, tok_spans *out, char *err,
                        size_t err_size) {
    const char *s = text + off;
    size_t prev = 0;   /* start of the text not yet out */
    for (size_t a = 0; a < len;) {
        if (!is_digit(s[a])) {
            a++;
            continue;
        }
        size_t e = a;
        while (e < len && is_digit(s[e])) e++;
        char next = e < len ? s[e] : 0;
        bool word = next == '_' || (next >= 'A' && next <= 'Z') || (next >= 'a' && next <= 'z');
        if (mode == DIGITS_WORD && !word) {
            size_t first = (e - a) % 3 ? (e - a) % 3 : 3;
            if (a > prev && spans_push(out, off + prev, a - prev)) goto oom;
            for (size_t g = a, k = first; g < e; g += k, k = 3)
                if (spans_push(out, off + g, k)) goto oom;
            prev = e;
        } else if (mode == DIGITS_SPLIT && e - a >= 3) {
            for (size_t p = a + (e - a) % 3; p + 3 <= e; p += 3) {
                if (p > prev && spans_push(out, off + prev, p - prev)) goto oom;
                if (p > prev) prev = p;
            }
        }
        a = e;
    }
    if (prev < len && spans_push(out, off + prev, len - prev)) goto oom;
    return 0;
oom:
    snprintf(err, err_size, "out of memory while pre-tokenizing %zu bytes", len);
    return -1;
}

int tok_pre_split(const tokenizer *t, const char *text, size_t len, tok_spans *out, char *err, size_t err_size) {
    tok_spans cur = {0}, next = {0};
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    pcre2_match_context *mc = pcre2_match_context_create(NULL);
    /* The JIT's default 32 KiB stack is too small for long runs through a group repeat; 8 MiB is
     * reserved, pages are touched only as used. */
    pcre2_jit_stack *js = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
    int rc = md && mc && js && !spans_push(&cur, 0, len) ? 0 : -1;
    if (rc) snprintf(err, err_size, "out of memory while pre-tokenizing %zu bytes", len);
    if (!rc) pcre2_jit_stack_assign(mc, NULL, js);
    for (int r = 0; !rc && r < t->n_rx; r++) {
        next.n = 0;
        for (size_t i = 0; !rc && i < cur.n; i++)
            rc = t->rx_digits[r]
                     ? split_digits(t->rx_digits[r], text, cur.s[i].off, cur.s[i].len, &next, err, err_size)
                     : split_piece(t->rx[r], text, cur.s[i].off, cur.s[i].len, md, mc, &next, err, err_size);
        tok_spans tmp = cur;
        cur = next;
        next = tmp;
    }
    pcre2_match_data_free(md);
    pcre2_match_context_free(mc);
    pcre2_jit_stack_free(js);
    free(next.s);
    if (rc) {
        free(cur.s);
        return -1;
    }
    *out = cur;
    return 0;
}
