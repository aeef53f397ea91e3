/*
 * cliopt: command-line options parsed exactly, for the three programs.
 *
 * getopt_long accepts any unambiguous prefix of a long option: `--verb`
 * quietly means `--verbose`, and adding an option that shares a prefix
 * changes what an old command line does. Our command lines are a stable
 * interface (scripts and agents type them), so prefixes are refused.
 */
#ifndef VRUN_CLIOPT_H
#define VRUN_CLIOPT_H

#include <getopt.h>

/* What cliopt_getopt refused: the option as typed and the one it abbreviates. */
struct cliopt_abbrev {
	const char *typed; /* argv element ("--verb" or "--verb=x"); print up to '=' */
	const char *full;  /* longopts name, without the dashes */
};

/*
 * getopt_long (same arguments, same globals) without prefix matching. An
 * abbreviated long option returns '?' with ab filled in; otherwise ab's
 * members are NULL.
 */
int cliopt_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts,
                  struct cliopt_abbrev *ab);

#endif
