/*
 * common/fds.c: descriptor hygiene after fork(), in any process.
 */
#include "common/fds.h"

#include <sys/syscall.h>
#include <unistd.h>

void close_fds_except(int *keep, size_t n)
{
    /* Insertion sort: the lists are a handful long and qsort may allocate. */
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
            int t = keep[j];
            keep[j] = keep[j - 1];
            keep[j - 1] = t;
        }
    unsigned next = 3;
    for (size_t i = 0; i < n; i++) {
        if (keep[i] < 0 || (unsigned)keep[i] < next)
            continue;
        if ((unsigned)keep[i] > next)
            syscall(SYS_close_range, next, (unsigned)keep[i] - 1, 0);
        next = (unsigned)keep[i] + 1;
    }
    syscall(SYS_close_range, next, ~0U, 0);
}
