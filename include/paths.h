/*
 * paths: the one place that decides where vrun keeps its files.
 *
 *   VAULT_HOME             if set (must be absolute)
 *   $XDG_DATA_HOME/vrun    if XDG_DATA_HOME is set and absolute
 *   $HOME/.local/share/vrun otherwise (HOME, else the password database)
 *
 * The runtime directory (control socket) is $XDG_RUNTIME_DIR/vrun when
 * XDG_RUNTIME_DIR is set and absolute, else $VAULT_HOME/run. When VAULT_HOME
 * was given explicitly and XDG_RUNTIME_DIR is used, a subdirectory named
 * after a hash of VAULT_HOME keeps two installations from sharing a
 * socket: setting VAULT_HOME alone isolates a whole installation.
 */
#ifndef VRUN_PATHS_H
#define VRUN_PATHS_H

struct paths {
	char *home;    /* VAULT_HOME */
	char *db;      /* $home/vault.db */
	char *lock;    /* $home/vault.lock (flock target for writers) */
	char *audit;   /* $home/audit.log */
	char *runtime; /* control socket directory */
};

/* Fill *p from the environment; 0 or VERR_NO_HOME / VERR_NOMEM. */
int paths_resolve(struct paths *p);

/* Free the strings and zero *p; safe on a zeroed struct. */
void paths_clear(struct paths *p);

#endif
