/* The option loop the commands share: getopt_long over argv, one line for what it refuses. */
#include <getopt.h>
#include <stdio.h>

#include "cli/cli.h"

int tf_cli_options(const char *cmd, int argc, char **argv, const struct option *opts,
                   int (*take)(int c, const char *arg, void *ctx), void *ctx)
{
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (c == 'h')
            return 0;
        if (c == ':') {
            fprintf(stderr, "%s: %s needs a value (see --help)\n", cmd, argv[optind - 1]);
            return 2;
        }
        if (c == '?') {
            fprintf(stderr, "%s: unknown option '%s' (see --help)\n", cmd, argv[optind - 1]);
            return 2;
        }
        if (take(c, optarg, ctx))
            return 2;
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", cmd, argv[optind]);
        return 2;
    }
    return -1;
}
