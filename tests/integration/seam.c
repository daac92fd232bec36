/*
 * tests/integration/seam.c: drives the run path's prepare/start/wait seam from
 * one process, as a daemon or an embedder would, for test_seam.py.
 *
 *   seam concurrent [KEY=VALUE...]  prepare two runs, start both, wait both;
 *                                   prints each result as a JSON line
 *   seam release [KEY=VALUE...]     prepare a run, print "prepared PID...",
 *                                   wait for a line on stdin, release it, then
 *                                   print "released CHILDREN" (our children left)
 *
 * KEY=VALUE pairs are policy keys ("limits.memory=64M", "network.allow=x.test").
 */
#include "core/run.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct policy *policy_from_args(int argc, char **argv)
{
    struct cordon_err err = { 0 };
    struct policy *p = policy_new(&err);
    for (int i = 0; p && i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq)
            continue;
        *eq = '\0';
        if (policy_set(p, argv[i], eq + 1, argv[i], &err) < 0) {
            fprintf(stderr, "seam: %s\n", err.msg);
            exit(2);
        }
    }
    if (!p || policy_finalize(p, &err) < 0) {
        fprintf(stderr, "seam: %s\n", err.msg);
        exit(2);
    }
    return p;
}

/* Our children, from /proc: what a run left running. */
static int count_children(void)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
    FILE *f = fopen(path, "re");
    int n = 0, pid;
    while (f && fscanf(f, "%d", &pid) == 1)
        n++;
    if (f)
        fclose(f);
    return n;
}

static void print_result(const struct policy *p, const struct sandbox_result *res,
                         const char *label)
{
    json_t *j = sandbox_result_to_json(res, p);
    json_object_set_new(j, "label", json_string(label));
    char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    printf("%s\n", text);
    free(text);
    json_decref(j);
}

static int concurrent(const struct policy *p)
{
    struct cordon_err err = { 0 };
    struct run *a = NULL, *b = NULL;
    if (run_prepare(p, NULL, &a, &err) < 0 || run_prepare(p, NULL, &b, &err) < 0) {
        fprintf(stderr, "seam: prepare: %s\n", err.msg);
        return 1;
    }
    /* Each run's output goes to a pipe of its own, read after both ended. */
    int pa[2], pb[2];
    if (pipe(pa) < 0 || pipe(pb) < 0)
        return 1;
    char *argv_a[] = { "sh", "-c", "sleep 0.3; echo from-a; exit 3", NULL };
    char *argv_b[] = { "sh", "-c", "echo from-b", NULL };
    struct sandbox_call ca = {
        .argv = argv_a, .in_fd = -1, .out_fd = pa[1], .err_fd = 2, .sig_fd = -1
    };
    struct sandbox_call cb = {
        .argv = argv_b, .in_fd = -1, .out_fd = pb[1], .err_fd = 2, .sig_fd = -1
    };
    if (run_start(a, &ca, &err) < 0 || run_start(b, &cb, &err) < 0) {
        fprintf(stderr, "seam: start: %s\n", err.msg);
        return 1;
    }
    struct sandbox_result ra, rb;
    /* B first: A is still running while B is supervised to its end. */
    if (run_wait(b, &rb, &err) < 0 || run_wait(a, &ra, &err) < 0) {
        fprintf(stderr, "seam: wait: %s\n", err.msg);
        return 1;
    }
    close(pa[1]);
    close(pb[1]);
    char out[256];
    ssize_t n = read(pa[0], out, sizeof out - 1);
    out[n > 0 ? n : 0] = '\0';
    print_result(p, &ra, out);
    n = read(pb[0], out, sizeof out - 1);
    out[n > 0 ? n : 0] = '\0';
    print_result(p, &rb, out);
    run_release(a);
    run_release(b);
    printf("children %d\n", count_children());
    return 0;
}

static int release_unstarted(const struct policy *p)
{
    struct cordon_err err = { 0 };
    struct run *run = NULL;
    if (run_prepare(p, NULL, &run, &err) < 0) {
        fprintf(stderr, "seam: prepare: %s\n", err.msg);
        return 1;
    }
    printf("prepared %s %d\n", run_get_id(run), count_children());
    fflush(stdout);
    char line[16];
    if (!fgets(line, sizeof line, stdin))
        return 1;
    run_release(run);
    printf("released %d\n", count_children());
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    struct policy *p = policy_from_args(argc - 2, argv + 2);
    int rc = strcmp(argv[1], "concurrent") == 0 ? concurrent(p)
        : strcmp(argv[1], "release") == 0       ? release_unstarted(p)
                                                : 2;
    policy_free(p);
    return rc;
}
