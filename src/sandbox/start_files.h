/*
 * sandbox/start_files.h: the layout of the call's files in their sealed
 * memfd (start.c writes it; start_place_files() and, inside a gVisor
 * sandbox, cordon-gvisor-init read it). Types only: the helper includes it
 * without the cordon library.
 */
#pragma once
#include <stdint.h>

/* Before each file's path (path_len bytes, no NUL) and its data (len bytes). */
struct start_file_header {
    uint32_t path_len;
    uint32_t mode;
    uint64_t len;
};
