/* caliper compare — placeholder until the module lands. */
#include "cli.h"
int cmd_compare(int argc, char **argv) { (void)argc; (void)argv; return cli_fail("compare", "not in this build yet"); }
