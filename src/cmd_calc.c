/* caliper calc — placeholder until the module lands. */
#include "cli.h"
int cmd_calc(int argc, char **argv) { (void)argc; (void)argv; return cli_fail("calc", "not in this build yet"); }
