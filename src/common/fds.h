/*
 * common/fds.h: closing what a forked process inherited but must not hold.
 */
#pragma once
#include <stddef.h>

/* Close every descriptor from 3 up except those in KEEP (sorted in place;
 * negative entries ignored). Async-signal-safe: no allocation. */
void close_fds_except(int *keep, size_t n);
