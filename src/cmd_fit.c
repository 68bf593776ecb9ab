/* caliper fit — placeholder until the module lands. */
#include "cli.h"
int cmd_fit(int argc, char **argv) { (void)argc; (void)argv; return cli_fail("fit", "not in this build yet"); }
