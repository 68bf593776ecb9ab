/* caliper report — placeholder until the module lands. */
#include "cli.h"
int cmd_report(int argc, char **argv) { (void)argc; (void)argv; return cli_fail("report", "not in this build yet"); }
