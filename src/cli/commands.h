/* The `tollfree` subcommands. Each returns the process exit status. */
#ifndef TF_CLI_COMMANDS_H
#define TF_CLI_COMMANDS_H

int tf_cmd_sweep(int argc, char **argv);
int tf_cmd_serve(int argc, char **argv);
int tf_cmd_journal(int argc, char **argv);
/* `tollfree engine run|gen|snapshot|serve`: cmd_engine.c dispatches; serve is cmd_engine_serve.c.
 */
int tf_cmd_engine(int argc, char **argv);
int tf_cmd_engine_serve(int argc, char **argv);
/* `tollfree paper`: the paper-trading loop (cmd_paper.c). */
int tf_cmd_paper(int argc, char **argv);
/* `tollfree trades`: one combo's trade list (cmd_trades.c). */
int tf_cmd_trades(int argc, char **argv);

#endif
