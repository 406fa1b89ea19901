/* Growable public structs (tf_sweep_opts, tf_client_opts, tf_journal_opts, tf_prices_opts,
 * tf_oos_opts, tf_time_opts, tf_paper_config, tf_orders_opts): one rule for their `size` field,
 * in one place (docs/api.md, "Growable structs"). Not installed.
 *
 * Such a struct starts with `size_t size`: 0 means the layout this library was built with; a
 * caller built against an older, shorter layout passes its own sizeof and the fields it lacks
 * take their defaults; a longer struct (from a newer header) is accepted only if every byte this
 * library does not know is zero, so that a new option is never silently ignored. The rules for a
 * struct that grows: fields are only appended, after sizeof of the previous layout (never into
 * its tail padding, whose bytes an older caller may leave unset), and a new field's zero value is
 * its default. */
#ifndef TF_COMMON_OPTS_SIZE_H
#define TF_COMMON_OPTS_SIZE_H

#include <stddef.h>
#include <stdint.h>

/* Where field f of struct T ends: the smallest size that covers it. A struct's min (below) is
 * TFU_FIELD_END of the last field of its first sized layout. */
#define TFU_FIELD_END(T, f) (offsetof(T, f) + sizeof(((T *)0)->f))

/* Reads the caller's options src (first member size_t size) into dst, the struct as this library
 * knows it (known = sizeof *dst). The caller's size, 0 meaning known, must be at least min;
 * dst receives src's first min(size, known) bytes and zeros after them (the fields an older
 * caller lacks read 0, their default); when size > known, bytes [known, size) of src must all be
 * zero. On success dst->size is known. Returns 0, or TF_E_INVALID_ARG (size below min, or a
 * non-zero byte beyond known) with dst untouched. src and dst must not be NULL. */
int tfu_opts_load(void *dst, size_t known, const void *src, size_t min);
/* The same rule for a struct whose size field is not a size_t (tf_orders_opts: a uint32_t, kept
 * until its next layout break): the caller reads size from its own field and passes it (0 meaning
 * known); dst's size field is left as copied from src, for the caller to set. */
int tfu_opts_load_n(void *dst, size_t known, const void *src, size_t size, size_t min);

/* ---- limit options of the servers (`serve`, `engine serve`): one parser, one wording ---- */

/* A byte count: decimal digits with an optional binary suffix K, M or G (1K = 1024; "KB" and
 * "KiB" read the same), within [lo, hi]. Returns 0 with *out set, or TF_E_INVALID_ARG with a
 * message in msg (cap bytes) that names the option and the value and says what is expected,
 * e.g. "--max-memory 1X: not a size (digits with an optional K, M or G suffix, e.g. 64M)" or
 * "--max-memory 512K: give at least 1M (1048576 bytes)". Prints nothing. */
int tfu_parse_size(const char *opt, const char *val, uint64_t lo, uint64_t hi, uint64_t *out,
                   char *msg, size_t cap);
/* A plain count (digits, no suffix) within [lo, hi]; the same returns and wording. */
int tfu_parse_count(const char *opt, const char *val, uint64_t lo, uint64_t hi, uint64_t *out,
                    char *msg, size_t cap);

/* One limit option of a server's table: its name, a size (K/M/G) or a count, its range, and where
 * the value goes (an int i, a u64 u, or a u32 u32: exactly one is set; hi must fit it).
 * zero_is_none: 0 is stored as -1 ("none", --conn-reserve; int only). Every limit option of
 * `serve` and `engine serve` is a row of such a table (src/net/config.c has the rows both
 * servers share), so they read and refuse values alike. */
typedef struct tfu_limit_opt {
    const char *name;
    int sized;
    uint64_t lo, hi;
    int *i;
    uint64_t *u;
    int zero_is_none;
    uint32_t *u32;
} tfu_limit_opt;

/* Option `opt` with value `val` against the table: 1 taken (stored), 0 not in the table, -1 a bad
 * value (msg says why, as tfu_parse_size does). */
int tfu_limit_take(const tfu_limit_opt *t, size_t n, const char *opt, const char *val, char *msg,
                   size_t cap);

#endif
