/*
 * commands.h - the tern subcommands. Each takes the arguments after "tern"
 * (argv[0] is the command's name) and returns the process exit status.
 */
#ifndef TERN_NODE_COMMANDS_H
#define TERN_NODE_COMMANDS_H

int cmd_node(int argc, char **argv);
int cmd_pub(int argc, char **argv);
int cmd_sub(int argc, char **argv);
int cmd_top(int argc, char **argv);

#endif
