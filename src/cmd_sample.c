/* caliper sample — placeholder until the module lands. */
#include "cli.h"
int cmd_sample(int argc, char **argv) { (void)argc; (void)argv; return cli_fail("sample", "not in this build yet"); }
