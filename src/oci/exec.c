/*
 * oci/exec.c: exec, a process joining a running container's boundary.
 */
#include "oci/oci.h"

int oci_exec(int argc, char **argv)
{
    (void)argc;
    struct cordon_err err;
    err_set(&err, CORDON_E_UNSUPPORTED, "%s: not yet", argv[0]);
    return oci_fail(&err);
}
