#include <stdio.h>

#include "cli/commands.h"

/* Placeholder until the serve command lands; replaced by its own issue's work. */
int tf_cmd_serve(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fputs("tollfree serve: not built yet\n", stderr);
    return 2;
}
