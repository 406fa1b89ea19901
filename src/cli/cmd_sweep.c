#include <stdio.h>

#include "cli/commands.h"

/* Placeholder until the sweep command lands; replaced by its own issue's work. */
int tf_cmd_sweep(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fputs("tollfree sweep: not built yet\n", stderr);
    return 2;
}
