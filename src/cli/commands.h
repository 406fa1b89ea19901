/* The `tollfree` subcommands. Each returns the process exit status. */
#ifndef TF_CLI_COMMANDS_H
#define TF_CLI_COMMANDS_H

int tf_cmd_sweep(int argc, char **argv);
int tf_cmd_serve(int argc, char **argv);
int tf_cmd_journal(int argc, char **argv);

#endif
