/*
 * common/installed.h: where cordon finds the files it does not embed (the
 * microvm level's initramfs and kernel builder, the egress presets): beside
 * its executable in a build tree, else where `meson install` put them,
 * compiled in relative to the executable's directory (meson.build says why),
 * so a prefix changes no object.
 */
#pragma once
#include <limits.h>
#include <stddef.h>

/* The directory of the running executable (links resolved): 0, or -1 with errno. */
int installed_exe_dir(char *out, size_t len);

/* NAME in cordon's helper directory (LIBEXECDIR/cordon): 0, or -1. */
int installed_path(const char *name, char out[PATH_MAX]);

/* NAME in cordon's data directory (DATADIR/cordon): 0, or -1. */
int installed_data_path(const char *name, char out[PATH_MAX]);
