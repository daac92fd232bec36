/*
 * daemon/sandboxd_rest.c: sandboxd's REST surface on the daemon's host
 * workspace (libevent's HTTP server): GET, HEAD, PUT and DELETE of
 * /v1/files/{path}, GET /v1/health and /v1/metadata. Every path is resolved
 * from the workspace's descriptor with nothing followed out of it
 * (daemon/workspace_files.h): "..", a link and a mount are refused with 403,
 * whatever a run planted. Writes are atomic (a new file renamed into place).
 * A PUT or DELETE keeps out of the workspace's protected names and of every
 * repository in it (write_refused()).
 */
#include "daemon/sandboxd_int.h"

#include "common/cleanup.h"
#include "daemon/workspace_files.h"
#include "sandbox/gitscan.h"
#include "sandbox/names.h"

#include <dirent.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A PUT's body is held in memory whole: at most this. */
#define MAX_BODY (256ull << 20)
/* A listing stops here (a run may have made millions of names). */
#define MAX_ENTRIES 100000

extern char **environ;

static void reply_json(struct evhttp_request *req, int code, const char *reason, json_t *body)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    struct evbuffer *buf = evbuffer_new();
    if (buf && text) {
        evbuffer_add(buf, text, strlen(text));
        evbuffer_add(buf, "\n", 1);
    }
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evhttp_send_reply(req, code, reason, buf);
    if (buf)
        evbuffer_free(buf);
    free(text);
}

static void reply_error(struct evhttp_request *req, int code, const char *status, const char *fmt,
                        ...) __attribute__((format(printf, 4, 5)));
static void reply_error(struct evhttp_request *req, int code, const char *status, const char *fmt,
                        ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    reply_json(req, code, NULL, json_pack("{s:s, s:s}", "code", status, "message", msg));
}

/* A failed operation on PATH, told by its errno. */
static void reply_errno(struct evhttp_request *req, int e, const char *what, const char *path)
{
    if (e == ENOENT || e == ENOTDIR)
        reply_error(req, 404, "NOT_FOUND", "'%s' does not exist in the workspace", path);
    else if (e == ELOOP || e == EXDEV || e == EACCES || e == EPERM || e == EAGAIN)
        reply_error(req, 403, "PERMISSION_DENIED",
                    "'%s': a link, a mount or a name outside the workspace is not followed", path);
    else if (e == ENOTEMPTY || e == EEXIST)
        reply_error(req, 409, "CONFLICT",
                    "directory '%s' is not empty; pass recursive=true to remove it", path);
    else if (e == EISDIR)
        reply_error(req, 400, "INVALID_ARGUMENT", "'%s' is a directory", path);
    else
        reply_error(req, 500, "INTERNAL", "cannot %s '%s': %s", what, path, strerror(e));
}

/*
 * The request's path past PREFIX, percent-decoded, as a path relative to the
 * workspace ("." for itself) in OUT: no NUL, no "..", empty and "." parts
 * dropped. -1 when it cannot be one (the reply sent).
 */
static int workspace_path(struct evhttp_request *req, const char *raw, char *out, size_t size)
{
    size_t len = 0;
    _cleanup_free_ char *dec = evhttp_uridecode(raw, 0, &len);
    if (!dec || strlen(dec) != len) {
        reply_error(req, 400, "INVALID_ARGUMENT", "the path is not a valid name");
        return -1;
    }
    int rc = wsfile_normalize(dec, out, size);
    if (rc == WSFILE_PATH_UP)
        reply_error(req, 403, "PERMISSION_DENIED",
                    "path traversal outside the workspace is refused");
    else if (rc < 0)
        reply_error(req, 400, "INVALID_ARGUMENT", "the path is too long");
    return rc < 0 ? -1 : 0;
}

/* ---- GET and HEAD ---- */

static json_t *entry_json(int dir, const char *name)
{
    struct stat st;
    if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
        !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)))
        return NULL; /* links, FIFOs, sockets: not something the API can open */
    char when[32];
    struct tm tm;
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&st.st_mtime, &tm));
    char mode[8];
    snprintf(mode, sizeof mode, "%04o", st.st_mode & 07777);
    return json_pack("{s:s, s:I, s:s, s:s, s:s}", "name", name, "size", (json_int_t)st.st_size,
                     "type", S_ISDIR(st.st_mode) ? "directory" : "file", "modified_at", when,
                     "mode", mode);
}

static void serve_listing(struct evhttp_request *req, int fd, const char *path)
{
    int dup = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    DIR *dir = dup >= 0 ? fdopendir(dup) : NULL;
    if (!dir) {
        if (dup >= 0)
            close(dup);
        reply_errno(req, errno, "list", path);
        return;
    }
    json_t *entries = json_array();
    struct dirent *e;
    unsigned n = 0;
    while ((e = readdir(dir)) && n < MAX_ENTRIES) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        json_t *one = entry_json(fd, e->d_name);
        if (one) {
            json_array_append_new(entries, one);
            n++;
        }
    }
    closedir(dir);
    char shown[PATH_MAX + 2];
    snprintf(shown, sizeof shown, "/%s", strcmp(path, ".") == 0 ? "" : path);
    reply_json(req, 200, "OK", json_pack("{s:s, s:o}", "path", shown, "entries", entries));
}

static void serve_get(struct sandboxd *sd, struct evhttp_request *req, const char *path)
{
    /* O_NONBLOCK: a FIFO a run left must not hang the daemon. */
    _cleanup_close_ int fd =
        wsfile_open(sd->root_fd, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        reply_errno(req, errno, "open", path);
        return;
    }
    if (S_ISDIR(st.st_mode)) {
        serve_listing(req, fd, path);
        return;
    }
    if (!S_ISREG(st.st_mode)) {
        reply_error(req, 403, "PERMISSION_DENIED", "'%s' is not a regular file", path);
        return;
    }
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", "application/octet-stream");
    struct evbuffer *buf = evbuffer_new();
    if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD) {
        char size[32];
        snprintf(size, sizeof size, "%lld", (long long)st.st_size);
        evhttp_add_header(h, "Content-Length", size);
    } else if (buf && st.st_size > 0) {
        /* The file's bytes go out as the socket takes them (the descriptor is the buffer's). */
        if (evbuffer_add_file(buf, fd, 0, st.st_size) == 0)
            fd = -1;
    }
    evhttp_send_reply(req, 200, "OK", buf);
    if (buf)
        evbuffer_free(buf);
}

/* ---- what a write may not touch ---- */

#define GIT_WHY "protected in the workspace: git on the host runs its hooks and config"

/* N bytes of a path in a reply, at most 300 (the reply's message is 512 bytes). */
static int shown(size_t n)
{
    return n > 300 ? 300 : (int)n;
}

/*
 * Is PATH (written by a PUT, or removed by a DELETE: DEL) a repository's
 * business: a .git at any depth (a directory or a gitdir pointer), or in a
 * directory git takes for a git directory, counting the names the write
 * itself makes (a bare repository's HEAD, objects, refs or commondir)? Why,
 * in WHY. Resolved from ROOT_FD, following nothing.
 */
static bool git_refused(int root_fd, const char *path, bool del, char *why, size_t len)
{
    _cleanup_close_ int dir = fcntl(root_fd, F_DUPFD_CLOEXEC, 3); /* -1: made by the write */
    for (const char *c = path;; c += strcspn(c, "/") + 1) {
        size_t n = strcspn(c, "/");
        bool last = !c[n];
        size_t at = (size_t)(c - path) - (c != path); /* the directory: PATH's first AT bytes */
        char name[NAME_MAX + 1];
        snprintf(name, sizeof name, "%.*s", (int)(n > NAME_MAX ? NAME_MAX : n), c);
        if (gitscan_dotgit_name(c, n)) {
            if (last)
                snprintf(why, len, "'%.300s' is a repository's .git, " GIT_WHY, path);
            else
                snprintf(why, len, "'%.300s' is in a repository's .git ('%.*s'), " GIT_WHY, path,
                         shown((size_t)(c - path) + n), path);
            return true;
        }
        if (dir >= 0 && gitscan_gitdir_shaped(dir, del ? NULL : name)) {
            int n_at = at ? shown(at) : 1;
            const char *d = at ? path : "/";
            if (gitscan_gitdir_shaped(dir, NULL))
                snprintf(why, len, "'%.300s' is in a git directory ('%.*s'), " GIT_WHY, path, n_at,
                         d);
            else
                snprintf(why, len, "'%.300s' would make '%.*s' a git directory, " GIT_WHY, path,
                         n_at, d);
            return true;
        }
        int next = dir >= 0 ? wsfile_open(dir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0) : -1;
        closep(&dir);
        dir = next;
        if (last && del && dir >= 0 && gitscan_gitdir_shaped(dir, NULL)) {
            snprintf(why, len, "'%.300s' is a git directory, " GIT_WHY, path);
            return true;
        }
        if (last)
            return false;
    }
}

/*
 * Why a PUT (or a DELETE, DEL) of PATH is refused, told in WHY; false when
 * it is not. A write or removal here is a run's in all but name: the
 * workspace's protected names (.envrc, .vscode/...) and a commit's own are
 * as much out of its reach as of the command's (core/run.c, a call's
 * files). So is .git, which a run may write because gitscan.h undoes after
 * it what git would run: no scan follows a REST write, so no repository is
 * touched at all (unless filesystem.unsafe_unprotect took .git out). What
 * GET reads stays readable.
 */
static bool write_refused(const struct sandboxd *sd, const char *path, bool del, char *why,
                          size_t len)
{
    const struct policy *p = sd->d->cfg.policy;
    if (names_refused_path(p, path)) {
        snprintf(why, len, "'%.300s' is a protected name in the workspace", path);
        return true;
    }
    return gitscan_enabled(p) && git_refused(sd->root_fd, path, del, why, len);
}

/* The entry NAME of DIR (REL in the workspace) a DELETE may not remove (CTX: the daemon's). */
static bool keep_entry(int dir, const char *name, const char *rel, void *ctx)
{
    const struct sandboxd *sd = ctx;
    const struct policy *p = sd->d->cfg.policy;
    if (names_refused_path(p, rel))
        return true;
    if (!gitscan_enabled(p))
        return false;
    if (gitscan_dotgit_name(name, strlen(name)))
        return true;
    _cleanup_close_ int sub = wsfile_open(dir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0);
    return sub >= 0 && gitscan_gitdir_shaped(sub, NULL);
}

/* ---- PUT ---- */

/* The "file" part of a multipart/form-data BODY (TYPE its content type): *DATA, *LEN. */
static int multipart_file(const char *type, const char *body, size_t size, const char **data,
                          size_t *len)
{
    const char *b = strstr(type, "boundary=");
    if (!b)
        return -1;
    b += 9;
    char boundary[80];
    size_t bl = strcspn(b, ";");
    if (bl >= 2 && b[0] == '"' && b[bl - 1] == '"') {
        b++;
        bl -= 2;
    }
    if (!bl || bl + 4 >= sizeof boundary)
        return -1;
    snprintf(boundary, sizeof boundary, "--%.*s", (int)bl, b);
    size_t dl = strlen(boundary);
    for (const char *p = memmem(body, size, boundary, dl); p;) {
        const char *head = p + dl;
        const char *end = head;
        size_t left = size - (size_t)(head - body);
        const char *sep = memmem(head, left, "\r\n\r\n", 4);
        if (!sep)
            return -1;
        const char *content = sep + 4;
        const char *next = memmem(content, size - (size_t)(content - body), boundary, dl);
        if (!next || next < content + 2)
            return -1;
        /* Content-Disposition: form-data; name="file" (not filename="file") */
        size_t hl = (size_t)(sep - end);
        const char *name = head;
        while ((name = memmem(name, hl - (size_t)(name - head), "name=\"file\"", 11)) &&
               name > head && name[-1] != ';' && name[-1] != ' ' && name[-1] != '\t')
            name++;
        if (name) {
            *data = content;
            *len = (size_t)(next - 2 - content); /* the CRLF before the boundary */
            return 0;
        }
        p = next;
    }
    return -1;
}

static void serve_put(struct sandboxd *sd, struct evhttp_request *req, const char *path,
                      const char *query)
{
    mode_t mode = 0644;
    struct evkeyvalq q = { 0 };
    evhttp_parse_query_str(query ? query : "", &q);
    const char *m = evhttp_find_header(&q, "mode");
    bool mode_ok = !m || (strlen(m) == 4 && m[0] == '0' && strspn(m + 1, "01234567") == 3);
    if (m && mode_ok)
        mode = (mode_t)strtoul(m, NULL, 8);
    evhttp_clear_headers(&q);
    if (!mode_ok) {
        reply_error(req, 400, "INVALID_ARGUMENT", "mode must match ^0[0-7]{3}$");
        return;
    }
    if (strcmp(path, ".") == 0) {
        reply_error(req, 400, "INVALID_ARGUMENT", "the workspace itself is a directory");
        return;
    }
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    const char *data = len ? (const char *)evbuffer_pullup(in, -1) : "";
    const char *type = evhttp_find_header(evhttp_request_get_input_headers(req), "Content-Type");
    if (type && strncmp(type, "multipart/form-data", 19) == 0 &&
        multipart_file(type, data, len, &data, &len) < 0) {
        reply_error(req, 400, "INVALID_ARGUMENT",
                    "a multipart/form-data body needs its \"file\" part");
        return;
    }
    struct cordon_err err = { 0 };
    if (wsfile_write(sd->root_fd, path, data, len, mode, &err) < 0) {
        reply_errno(req, err.errnum ? err.errnum : EACCES, "write", path);
        return;
    }
    evhttp_send_reply(req, 204, "No Content", NULL);
}

/* ---- DELETE ---- */

/*
 * DELETE of the workspace itself (recursive: YES): everything in it but what
 * a DELETE may not remove (write_refused()), kept with the directories
 * holding it.
 */
static void serve_empty(struct sandboxd *sd, struct evhttp_request *req, bool yes)
{
    struct cordon_err err = { 0 };
    struct wsfile_keep keep = { .keep = keep_entry, .ctx = sd, .top = "." };
    if (!yes)
        reply_errno(req, ENOTEMPTY, "remove", "/");
    else if (gitscan_enabled(sd->d->cfg.policy) && gitscan_gitdir_shaped(sd->root_fd, NULL))
        reply_error(req, 403, "PERMISSION_DENIED",
                    "the workspace's root is a git directory, " GIT_WHY);
    else if (wsfile_empty_dir(sd->root_fd, &keep, &err) < 0)
        reply_errno(req, err.errnum ? err.errnum : EIO, "empty", "/");
    else
        evhttp_send_reply(req, 204, "No Content", NULL);
}

/*
 * DELETE of the directory LEAF of DIR (PATH) and all it holds: refused
 * whole, before anything goes, when it holds what a DELETE may not remove.
 */
static void serve_remove_tree(struct sandboxd *sd, struct evhttp_request *req, int dir,
                              const char *leaf, const char *path)
{
    struct cordon_err err = { 0 };
    struct wsfile_keep keep = { .keep = keep_entry, .ctx = sd, .top = path, .dry = true };
    _cleanup_close_ int fd = wsfile_open(dir, leaf, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0);
    if (fd < 0) {
        reply_errno(req, errno, "remove", path);
        return;
    }
    if (wsfile_empty_dir(fd, &keep, &err) < 0) {
        reply_errno(req, err.errnum ? err.errnum : EIO, "remove", path);
        return;
    }
    if (keep.kept) { /* why, as a DELETE of it would be told */
        char why[512];
        if (!write_refused(sd, keep.first, true, why, sizeof why))
            snprintf(why, sizeof why, "'%.300s' is protected in the workspace", keep.first);
        reply_error(req, 403, "PERMISSION_DENIED",
                    "cannot remove '%.100s' whole: %s; nothing removed", path, why);
        return;
    }
    keep.dry = false;
    if (wsfile_empty_dir(fd, &keep, &err) < 0)
        reply_errno(req, err.errnum ? err.errnum : EIO, "remove", path);
    else if (unlinkat(dir, leaf, AT_REMOVEDIR) < 0) /* ENOTEMPTY: a run made something meanwhile */
        reply_errno(req, errno, "remove", path);
    else
        evhttp_send_reply(req, 204, "No Content", NULL);
}

static void serve_delete(struct sandboxd *sd, struct evhttp_request *req, const char *path,
                         const char *query)
{
    struct evkeyvalq q = { 0 };
    evhttp_parse_query_str(query ? query : "", &q);
    const char *r = evhttp_find_header(&q, "recursive");
    bool yes = r &&
        (!strcmp(r, "true") || !strcmp(r, "1") || !strcmp(r, "True") || !strcmp(r, "TRUE") ||
         !strcmp(r, "t") || !strcmp(r, "T"));
    bool no = !r || !strcmp(r, "false") || !strcmp(r, "0") || !strcmp(r, "False") ||
        !strcmp(r, "FALSE") || !strcmp(r, "f") || !strcmp(r, "F");
    evhttp_clear_headers(&q);
    if (!yes && !no) {
        reply_error(req, 400, "INVALID_ARGUMENT", "recursive must be true or false");
        return;
    }
    struct cordon_err err = { 0 };
    if (strcmp(path, ".") == 0) { /* the workspace itself: emptied, never removed */
        serve_empty(sd, req, yes);
        return;
    }
    const char *leaf = NULL;
    _cleanup_close_ int dir = wsfile_open_parent(sd->root_fd, path, false, &leaf, &err);
    struct stat st;
    if (dir < 0 || fstatat(dir, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        reply_errno(req, dir < 0 ? (err.errnum ? err.errnum : ENOENT) : errno, "remove", path);
        return;
    }
    if (S_ISDIR(st.st_mode) && yes) {
        serve_remove_tree(sd, req, dir, leaf, path);
        return;
    }
    if (unlinkat(dir, leaf, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0)
        reply_errno(req, errno, "remove", path);
    else
        evhttp_send_reply(req, 204, "No Content", NULL);
}

/* ---- health and metadata ---- */

static bool sensitive(const char *name, size_t len)
{
    static const char *const markers[] = { "TOKEN", "SECRET", "PASS",   "CRED",
                                           "KEY",   "AUTH",   "PRIVATE" };
    char up[256];
    if (len >= sizeof up)
        return true;
    for (size_t i = 0; i < len; i++)
        up[i] = (char)(name[i] >= 'a' && name[i] <= 'z' ? name[i] - 32 : name[i]);
    up[len] = '\0';
    for (size_t i = 0; i < sizeof markers / sizeof markers[0]; i++)
        if (strstr(up, markers[i]))
            return true;
    return false;
}

static void serve_metadata(struct evhttp_request *req)
{
    json_t *env = json_object();
    for (char **e = environ; env && e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || strncmp(*e, "SANDBOX_", 8) != 0 || sensitive(*e, (size_t)(eq - *e)))
            continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(eq - *e), *e);
        json_object_set_new(env, name, json_string(eq + 1));
    }
    reply_json(req, 200, "OK", json_pack("{s:o}", "env", env));
}

/* ---- routing ---- */

static void on_request(struct evhttp_request *req, void *arg)
{
    struct sandboxd *sd = arg; /* its peer passed check_peer */
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *raw = uri ? evhttp_uri_get_path(uri) : NULL;
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    bool get = cmd == EVHTTP_REQ_GET || cmd == EVHTTP_REQ_HEAD;
    if (raw && get && strcmp(raw, "/v1/health") == 0) {
        if (sd->draining)
            reply_error(req, 503, "UNAVAILABLE", "the daemon is shutting down");
        else
            reply_json(req, 200, "OK",
                       json_pack("{s:s, s:I}", "status", "ok", "uptime_seconds",
                                 (json_int_t)((daemon_now_us() - sd->d->started_us) / 1000000)));
        return;
    }
    if (raw && get && strcmp(raw, "/v1/metadata") == 0) {
        serve_metadata(req);
        return;
    }
    if (!raw || (strncmp(raw, "/v1/files/", 10) != 0 && strcmp(raw, "/v1/files") != 0)) {
        reply_error(req, 404, "NOT_FOUND",
                    "no such endpoint; see /v1/files, /v1/health and "
                    "/v1/metadata");
        return;
    }
    char path[PATH_MAX];
    if (workspace_path(req, raw + 9, path, sizeof path) < 0)
        return;
    const char *query = evhttp_uri_get_query(uri);
    char why[512];
    if (!get && strcmp(path, ".") != 0 &&
        write_refused(sd, path, cmd == EVHTTP_REQ_DELETE, why, sizeof why)) {
        reply_error(req, 403, "PERMISSION_DENIED", "%s", why);
        return;
    }
    if (get)
        serve_get(sd, req, path);
    else if (cmd == EVHTTP_REQ_PUT)
        serve_put(sd, req, path, query);
    else if (cmd == EVHTTP_REQ_DELETE)
        serve_delete(sd, req, path, query);
    else
        reply_error(req, 405, "INVALID_ARGUMENT", "files take GET, HEAD, PUT and DELETE");
}

/* A new REST connection, its peer not checked yet. */
struct rest_peer {
    struct sandboxd *sd;
    struct bufferevent *bev; /* a reference of ours until the check */
};

/*
 * Right after the accept, in the loop's next turn: a peer the daemon does not
 * serve has its connection shut down before the HTTP server read more than
 * one chunk of what it sent (libevent 2.1 shows a new connection's socket to
 * no callback of ours, only its bufferevent, which gets the socket after).
 */
static void check_peer(evutil_socket_t unused, short what, void *arg)
{
    (void)unused;
    (void)what;
    struct rest_peer *rp = arg;
    int fd = bufferevent_getfd(rp->bev);
    uid_t uid = 0;
    bool admin = false;
    if (fd >= 0 && !sandboxd_peer_allowed(rp->sd, fd, &uid, &admin)) {
        rp->sd->d->refused_peers++;
        shutdown(fd, SHUT_RDWR); /* the server sees the end and frees the connection */
    }
    bufferevent_decref(rp->bev);
    free(rp);
}

static struct bufferevent *new_connection(struct event_base *base, void *arg)
{
    struct rest_peer *rp = calloc(1, sizeof *rp);
    struct bufferevent *bev = rp ? bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE) : NULL;
    const struct timeval now = { 0, 0 };
    if (!bev || event_base_once(base, -1, EV_TIMEOUT, check_peer, rp, &now) < 0) {
        if (bev)
            bufferevent_free(bev);
        free(rp);
        return NULL;
    }
    *rp = (struct rest_peer){ .sd = arg, .bev = bev };
    bufferevent_incref(bev);
    return bev;
}

int rest_open(struct sandboxd *sd, int fd, struct cordon_err *err)
{
    sd->http = evhttp_new(sd->d->base);
    if (!sd->http) {
        close(fd);
        return err_set(err, CORDON_E_INTERNAL, "cannot set up the HTTP server");
    }
    evhttp_set_allowed_methods(
        sd->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE);
    evhttp_set_max_body_size(sd->http, (ev_ssize_t)MAX_BODY);
    evhttp_set_max_headers_size(sd->http, 16384);
    evhttp_set_timeout(sd->http, 60);
    evhttp_set_gencb(sd->http, on_request, sd);
    evhttp_set_bevcb(sd->http, new_connection, sd);
    if (!evhttp_accept_socket_with_handle(sd->http, fd)) {
        close(fd);
        return err_set(err, CORDON_E_INTERNAL, "cannot set up the HTTP server");
    }
    return 0;
}
