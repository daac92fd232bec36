/*
 * oci/main.c: cordon-oci's command line, runc's: global options, then a
 * command. Errors go to the log as runc writes them (a JSON line with
 * level, msg and time under --log-format json: an engine shows the last
 * one) and to stderr; a failed command exits 1, as runc does.
 */
#include "oci/oci.h"

#include "common/hostpath.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct oci_opts oci_opts;

static void rfc3339(char *out, size_t size)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(out, size, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, size - n, ".%09ldZ", ts.tv_nsec);
}

void oci_log(const char *level, const char *fmt, ...)
{
    char msg[1024], when[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!strcmp(level, "info") && !oci_opts.debug && !oci_opts.log)
        return;
    rfc3339(when, sizeof when);
    if (oci_opts.log) {
        int fd = open(oci_opts.log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
        if (fd >= 0) {
            char *line = NULL;
            json_t *j = oci_opts.log_json
                ? json_pack("{s:s, s:s, s:s}", "level", level, "msg", msg, "time", when)
                : NULL;
            char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
            if (text)
                (void)!asprintf(&line, "%s\n", text);
            else
                (void)!asprintf(&line, "time=\"%s\" level=%s msg=\"%s\"\n", when, level, msg);
            if (line)
                (void)!write(fd, line, strlen(line));
            free(line);
            free(text);
            json_decref(j);
            close(fd);
        }
    }
    if (!strcmp(level, "error") || oci_opts.debug)
        fprintf(stderr, "cordon-oci: %s\n", msg);
}

int oci_fail(const struct cordon_err *err)
{
    oci_log("error", "%s", err->msg);
    return 1;
}

static const char usage[] =
    "usage: cordon-oci [GLOBAL OPTIONS] COMMAND [OPTIONS] ID\n"
    "\n"
    "A runc-compatible OCI runtime: each container runs under cordon's boundary\n"
    "(its level, seccomp allowlist, Landlock, egress gateway and audit log), with\n"
    "the policy named by the bundle's annotations (doc/oci.md).\n"
    "\n"
    "commands: create, start, run, state, kill, delete, exec, ps, list, pause, resume,\n"
    "          update, features\n"
    "\n"
    "global options:\n"
    "  --root DIR          state of the containers (default /run/cordon-oci, or\n"
    "                      $XDG_RUNTIME_DIR/cordon-oci for an ordinary user)\n"
    "  --log FILE          where errors are written (as well as stderr)\n"
    "  --log-format F      text or json\n"
    "  --systemd-cgroup    accepted; cgroupsPath slice:prefix:name is made as a path\n"
    "  --policy NAME       the policy in the admin's oci/ directory a container without\n"
    "                      a run.cordon.policy annotation runs under (default oci.yaml)\n"
    "  --debug             more in the log\n"
    "  --version           the version\n";

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
} commands[] = {
    { "create", oci_create },     { "start", oci_start },
    { "run", oci_run },           { "state", oci_state_cmd },
    { "kill", oci_kill },         { "delete", oci_delete },
    { "exec", oci_exec },         { "ps", oci_ps },
    { "pause", oci_pause },       { "resume", oci_resume },
    { "features", oci_features }, { "update", oci_update },
    { "list", oci_list },
};

bool oci_host_root(void)
{
    char line[128];
    read_small_at(AT_FDCWD, "/proc/self/uid_map", line, sizeof line); /* "" when unreadable */
    unsigned long long in = 1, out = 1, count = 0;
    return geteuid() == 0 && sscanf(line, "%llu %llu %llu", &in, &out, &count) == 3 && in == 0 &&
        out == 0 && count == 4294967295ull;
}

static void default_root(void)
{
    static char buf[4096];
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    if (!oci_host_root() && xdg && *xdg) {
        snprintf(buf, sizeof buf, "%s/cordon-oci", xdg);
        oci_opts.root = buf;
    } else {
        oci_opts.root = "/run/cordon-oci";
    }
}

int oci_main(int argc, char **argv);
int oci_main(int argc, char **argv)
{
    enum {
        O_ROOT = 1,
        O_LOG,
        O_FORMAT,
        O_SYSTEMD,
        O_DEBUG,
        O_VERSION,
        O_HELP,
        O_CRIU,
        O_ROOTLESS,
        O_POLICY,
        O_CGROUP_MANAGER
    };
    static const struct option opts[] = {
        { "root", required_argument, NULL, O_ROOT },
        { "log", required_argument, NULL, O_LOG },
        { "log-format", required_argument, NULL, O_FORMAT },
        { "systemd-cgroup", no_argument, NULL, O_SYSTEMD },
        { "debug", no_argument, NULL, O_DEBUG },
        { "version", no_argument, NULL, O_VERSION },
        { "help", no_argument, NULL, O_HELP },
        { "criu", required_argument, NULL, O_CRIU },
        { "rootless", required_argument, NULL, O_ROOTLESS },
        { "policy", required_argument, NULL, O_POLICY },
        { "cgroup-manager", required_argument, NULL, O_CGROUP_MANAGER }, /* crun's */
        { 0 },
    };
    default_root();
    const char *dir = getenv("CORDON_OCI_DIR");
    oci_opts.config_dir = dir && *dir ? dir : "/etc/cordon";
    opterr = 0;
    int c;
    while ((c = getopt_long_only(argc, argv, "+v", opts, NULL)) != -1) {
        switch (c) {
        case O_ROOT:
            oci_opts.root = optarg;
            break;
        case O_LOG:
            oci_opts.log = optarg;
            break;
        case O_FORMAT:
            if (strcmp(optarg, "json") && strcmp(optarg, "text")) {
                fprintf(stderr, "cordon-oci: --log-format: '%s' is not text or json\n", optarg);
                return 1;
            }
            oci_opts.log_json = !strcmp(optarg, "json");
            break;
        case O_DEBUG:
            oci_opts.debug = true;
            break;
        case O_POLICY:
            oci_opts.policy = optarg;
            break;
        case 'v':
        case O_VERSION:
            printf("cordon-oci version %s\nspec: 1.0.2\ncordon: %s\n", CORDON_VERSION,
                   CORDON_VERSION);
            return 0;
        case O_HELP:
            fputs(usage, stdout);
            return 0;
        case O_SYSTEMD:
        case O_CRIU:
        case O_ROOTLESS:
        case O_CGROUP_MANAGER:
            break;
        default:
            fprintf(stderr, "cordon-oci: unknown global option '%s'\n", argv[optind - 1]);
            return 1;
        }
    }
    if (optind >= argc) {
        fputs(usage, stderr);
        return 1;
    }
    int first = optind;
    const char *cmd = argv[first];
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(cmd, commands[i].name)) {
            optind = 0; /* each command parses its own options afresh */
            return commands[i].fn(argc - first, argv + first);
        }
    if (!strcmp(cmd, "help")) {
        fputs(usage, stdout);
        return 0;
    }
    oci_log("error", "unknown command '%s'", cmd);
    return 1;
}
