/* caliper run — placeholder until the module lands. */
#include "cli.h"
int cmd_run(int argc, char **argv) { (void)argc; (void)argv; return cli_fail("run", "not in this build yet"); }
