/*
 * common/home.c: the command's private HOME (see home.h).
 */
#include "common/home.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int home_make(const char *home)
{
    static const char gitconfig[] = "[safe]\n\tdirectory = *\n";
    if (mkdir(home, 0700) < 0 && errno != EEXIST)
        return -1;
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/.gitconfig", home) >= sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return errno == EEXIST ? 0 : -1;
    ssize_t n = write(fd, gitconfig, sizeof gitconfig - 1);
    int saved = errno;
    close(fd);
    errno = saved;
    return n == (ssize_t)(sizeof gitconfig - 1) ? 0 : -1;
}
