/*
 * audit/export.h: audit.export: otlp (see export.c). Used by audit.c only.
 */
#pragma once
#include "common/err.h"

#include <stdbool.h>
#include <stddef.h>

/* Start the exporter for URL (http://HOST:PORT/PATH); *OUT_FD is the sending end. */
int audit_export_start(const char *url, int *out_fd, struct cordon_err *err);

/* Hand one line over without waiting; false when it was dropped (channel full or gone). */
bool audit_export_send(int fd, const char *line, size_t len);
