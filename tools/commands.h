/* Subcommands of the litetopk tool; each takes the full argv (argv[1] is the subcommand name). */
#ifndef LTK_TOOLS_COMMANDS_H
#define LTK_TOOLS_COMMANDS_H

int cmd_demo(int argc, char **argv);
int cmd_knn(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_prefill(int argc, char **argv);

#endif
