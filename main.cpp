// magnetar: one executable for every role and every command.
#include "cli/cli.h"

int main(int argc, char** argv) { return magnetar::cli::run(argc, argv); }
