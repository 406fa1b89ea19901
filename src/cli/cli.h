/* Helpers shared by the CLI commands: reading series and grids. Messages go to stderr here,
 * since this is the program's edge, never the library's. */
#ifndef TF_CLI_H
#define TF_CLI_H

#include <stddef.h>
#include <stdint.h>

/* The embedded default data set (default_data.S). */
extern const double tf_default_close[];
extern const uint64_t tf_default_close_bytes;

/* Reads a close series: raw little-endian f64 when the name ends in .f64/.bin/.raw or
 * raw != 0, else a CSV with a header and a column named `column`. On success *out is a
 * malloc'd array of *n values. On failure prints one line "tollfree: PATH: ..." and returns -1. */
int tf_cli_read_series(const char *path, const char *column, int raw, double **out, int64_t *n);

/* Parses --grid: "default", "LO:HI:N" (N Hull lengths LO + j*(HI-LO)/(N-1)), or a CSV FILE of
 * six integer columns (L,half,sq,p,p3,p2; an optional header line). On success *out is a malloc'd
 * int64 [n][6]. On failure prints one line and returns -1. */
int tf_cli_read_grid(const char *spec, int64_t **out, int64_t *n);

/* Whole file into a NUL-terminated malloc'd buffer; -errno on failure. */
int tf_cli_slurp(const char *path, char **out, size_t *len);

#endif
