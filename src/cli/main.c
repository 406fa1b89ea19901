/* tollfree: the command-line front door. Dispatches to one subcommand per file. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"

static const char usage[] =
    "usage: tollfree <command> [options]\n"
    "\n"
    "The tollfree engine: an exact strategy sweep (HMA/HMA3 stop-and-reverse, five more "
    "built-ins,\n"
    "or your own C plugin), served over any boundary, and an order engine with\n"
    "its OFL1 journal and a durable service (sessions, pre-trade risk, resends).\n"
    "\n"
    "commands:\n"
    "  sweep     run the parameter sweep on a close series (default: the embedded data)\n"
    "  serve     run the sweep service (unix, tcp, stdio, shared memory)\n"
    "  journal   generate, verify and dump OFL1 journals\n"
    "  engine    the order engine: run, gen, snapshot, serve\n"
    "  paper     paper-trade a combo through the order engine, with backtest parity\n"
    "  trades    every trade of one combo (entry, exit, dates, return), as the sweep books it\n"
    "\n"
    "Run 'tollfree <command> --help' for a command's options; 'tollfree --version' prints the\n"
    "version.\n"
    "Exit status: 0 done; 1 the work failed (its input, a file, a server); 2 the command line\n"
    "itself (an unknown option, a bad value, a missing argument); 130 sweep or gen interrupted\n"
    "(Ctrl-C, SIGTERM; no output file is left half-written). The checks say 1 when the check\n"
    "fails and 2 for any trouble: journal verify/dump (1 an invalid journal, 2 bad usage or an\n"
    "unreadable file) and paper (1 no parity, 2 bad usage, input or venue).\n"
    "Examples:\n"
    "  tollfree sweep --top 5\n"
    "  tollfree sweep --input prices.csv --column close --grid 10:300:50 --out results.csv\n";

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        fputs(usage, stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version")) {
        puts("tollfree " TF_CLI_VERSION); /* the project's version (CMakeLists.txt) */
        return 0;
    }
    if (!strcmp(cmd, "sweep"))
        return tf_cmd_sweep(argc - 1, argv + 1);
    if (!strcmp(cmd, "serve"))
        return tf_cmd_serve(argc - 1, argv + 1);
    if (!strcmp(cmd, "journal"))
        return tf_cmd_journal(argc - 1, argv + 1);
    if (!strcmp(cmd, "engine"))
        return tf_cmd_engine(argc - 1, argv + 1);
    if (!strcmp(cmd, "paper"))
        return tf_cmd_paper(argc - 1, argv + 1);
    if (!strcmp(cmd, "trades"))
        return tf_cmd_trades(argc - 1, argv + 1);
    fprintf(stderr, "tollfree: unknown command '%s' (try 'tollfree --help')\n", cmd);
    return 2;
}
