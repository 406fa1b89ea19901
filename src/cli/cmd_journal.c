#include <stdio.h>

#include "cli/commands.h"

/* Placeholder until the journal command lands; replaced by its own issue's work. */
int tf_cmd_journal(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fputs("tollfree journal: not built yet\n", stderr);
    return 2;
}
