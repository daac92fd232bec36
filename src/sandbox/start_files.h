/*
 * sandbox/start_files.h: the layout of the call's files in their sealed
 * memfd (start.c writes it) and the one function that places them
 * (start_files.c: libc only, so cordon-gvisor-init and the microvm guest's
 * agent compile it without the cordon library).
 */
#pragma once
#include <stddef.h>
#include <stdint.h>

/* Before each file's path (path_len bytes, no NUL) and its data (len bytes). */
struct start_file_header {
    uint32_t path_len;
    uint32_t mode; /* permission bits, or START_FILE_MODE_DEFAULT */
    uint64_t len;
};

/* No mode asked for: 0666 less the umask the command runs under, as its own files. */
#define START_FILE_MODE_DEFAULT 0x80000000u

/*
 * The files of BUF (SIZE bytes in the layout above) beneath the directory
 * DIR_FD, as the caller's uid, with the modes asked for: parents made as
 * mkdir -p would (0777 less the umask), none there before, never through a
 * link, "." or "..". 0, or -1 with WHY saying which file and why, and
 * nothing of BUF left.
 */
int start_files_place(const char *buf, size_t size, int dir_fd, char *why, size_t why_len);
