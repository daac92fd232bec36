/*
 * common/installed.c: cordon's installed directories (see installed.h).
 */
#include "common/installed.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int installed_exe_dir(char *out, size_t len)
{
    ssize_t n = readlink("/proc/self/exe", out, len - 1);
    if (n < 0)
        return -1;
    out[n] = '\0';
    char *slash = strrchr(out, '/');
    if (slash)
        *slash = '\0';
    return 0;
}

/* DIR (absolute, or FROM_BIN relative to the executable's directory)/NAME. */
static int below(const char *absolute, const char *from_bin, const char *name, char out[PATH_MAX])
{
    char dir[PATH_MAX];
    if (from_bin) {
        if (installed_exe_dir(dir, sizeof dir) < 0 ||
            strlen(dir) + 1 + strlen(from_bin) + 1 > sizeof dir)
            return -1;
        strcat(dir, "/");
        strcat(dir, from_bin);
    } else {
        snprintf(dir, sizeof dir, "%s", absolute);
    }
    /* Said without the bin/.. where the directory exists. */
    char real[PATH_MAX];
    int n = snprintf(out, PATH_MAX, "%s/%s", realpath(dir, real) ? real : dir, name);
    return n > 0 && n < PATH_MAX ? 0 : -1;
}

int installed_path(const char *name, char out[PATH_MAX])
{
#ifdef CORDON_PKGLIBEXEC_FROM_BIN
    return below(NULL, CORDON_PKGLIBEXEC_FROM_BIN, name, out);
#else
    return below(CORDON_PKGLIBEXECDIR, NULL, name, out);
#endif
}

int installed_data_path(const char *name, char out[PATH_MAX])
{
#ifdef CORDON_PKGDATA_FROM_BIN
    return below(NULL, CORDON_PKGDATA_FROM_BIN, name, out);
#else
    return below(CORDON_PKGDATADIR, NULL, name, out);
#endif
}
