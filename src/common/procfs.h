/*
 * common/procfs.h: a process's /proc/PID/stat, read in one place and
 * parsed past its command name, which may hold anything (spaces, ')').
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * /proc/PID/stat read into BUF, through read_small_at(); what follows the
 * command name, from its third field (the state) on. NULL when PID has gone
 * (or the file cannot be read, or is cut short before the state): callers
 * take that as "gone". NULL for a PID not above 0, which may come from a
 * file: never the caller's own by mistake.
 */
const char *proc_stat(pid_t pid, char *buf, size_t size);

/* The same of /proc/self/stat: the caller's own, whatever its pid namespace. */
const char *proc_stat_self(char *buf, size_t size);

/*
 * Field FIELD (numbered as in proc(5): 3 is the state) of STAT, a text that
 * proc_stat() returned, as a number into *VALUE; false when STAT has no
 * such field or it is not a number.
 */
bool proc_stat_field(const char *stat, int field, unsigned long long *value);

/*
 * PID's children (those of each of its threads), appended to *PIDS (*N of
 * *CAP, grown as needed); nothing when PID has gone. Call it again on what
 * it added for the whole tree.
 */
void proc_add_children(pid_t pid, pid_t **pids, size_t *n, size_t *cap);
