/* caliper serve — placeholder until the module lands. */
#include "cli.h"
int cmd_serve(int argc, char **argv) { (void)argc; (void)argv; return cli_fail("serve", "not in this build yet"); }
