/* caliper runs / show / export — placeholder until the store lands. */
#include "cli.h"
int cmd_runs(int argc, char **argv)   { (void)argc; (void)argv; return cli_fail("runs", "not in this build yet"); }
int cmd_show(int argc, char **argv)   { (void)argc; (void)argv; return cli_fail("show", "not in this build yet"); }
int cmd_export(int argc, char **argv) { (void)argc; (void)argv; return cli_fail("export", "not in this build yet"); }
