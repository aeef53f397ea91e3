/*
 * cliopt: getopt_long without prefix matching (see cliopt.h).
 */
#include "cliopt.h"

#include <string.h>

int
cliopt_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts,
              struct cliopt_abbrev *ab)
{
	int idx = -1, c = getopt_long(argc, argv, shortopts, longopts, &idx);
	const char *typed;
	size_t len;

	ab->typed = ab->full = NULL;
	if (c == -1 || idx < 0)
		return c;
	/* "--name=value" and "--name" are argv[optind - 1]; "--name value" is one before. */
	typed = argv[optind - 1];
	if (longopts[idx].has_arg != no_argument && optarg == argv[optind - 1] && optind >= 2)
		typed = argv[optind - 2];
	len = strcspn(typed + 2, "=");
	if (strlen(longopts[idx].name) == len && strncmp(typed + 2, longopts[idx].name, len) == 0)
		return c;
	ab->typed = typed;
	ab->full = longopts[idx].name;
	return '?';
}
