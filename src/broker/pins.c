/*
 * broker/pins.c: the tool pin file. Runs in the broker (mcp wrap) and the
 * CLI (mcp pins approve); reads and replaces one host file.
 */
#include "broker/pins.h"
#include "common/json.h"

#include "common/digest.h"
#include "common/hostpath.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PINS_MAX_BYTES (16u << 20)

struct mcp_pins {
    char *path;
    json_t *root;
    json_t *server; /* borrowed from root: this session's entry */
    bool first;     /* the server was unknown when the session began */
    bool fixed;     /* from the policy: one set of pins, never written */
    bool dirty;
};

const char *pin_verdict_name(enum pin_verdict v)
{
    switch (v) {
    case PIN_OK:
        return "ok";
    case PIN_FIRST:
        return "first_use";
    case PIN_CHANGED:
        return "changed";
    case PIN_NEW:
        return "new";
    }
    return "?";
}

void mcp_tool_digest(const json_t *tool, char out[65])
{
    static const char *const fields[] = { "name",        "title",        "description",
                                          "inputSchema", "outputSchema", "annotations" };
    json_auto_t *j = json_object();
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        json_t *v = json_object_get(tool, fields[i]);
        json_object_set(j, fields[i], v ? v : json_null());
    }
    json_sha256_hex(j, out);
}

static json_t *load(const char *path, struct cordon_err *err)
{
    size_t n = 0;
    _cleanup_free_ char *text = read_small_file(path, PINS_MAX_BYTES, &n, err);
    if (!text) {
        if (err->errnum != ENOENT)
            return NULL;
        return json_pack("{s:{}}", "servers");
    }
    json_error_t je;
    json_t *root = json_parse_strict(text, n, 0, &je);
    if (!root || !json_is_object(json_object_get(root, "servers"))) {
        json_decref(root);
        err_set(err, CORDON_E_POLICY, "tool pins '%s': not a pin file (line %d: %s)", path, je.line,
                root ? "no servers object" : je.text);
        return NULL;
    }
    return root;
}

struct mcp_pins *mcp_pins_open(const char *path, struct cordon_err *err)
{
    _cleanup_free_ struct mcp_pins *pins = calloc(1, sizeof *pins);
    if (!pins || !(pins->path = strdup(path))) {
        err_set(err, CORDON_E_INTERNAL, "out of memory");
        return NULL;
    }
    if (!(pins->root = load(path, err))) {
        free(pins->path);
        return NULL;
    }
    return TAKE_PTR(pins);
}

struct mcp_pins *mcp_pins_fixed(char *const *pinned, size_t n, struct cordon_err *err)
{
    struct mcp_pins *pins = calloc(1, sizeof *pins);
    json_t *tools = json_object();
    if (!pins || !tools ||
        !(pins->root =
              json_pack("{s:{s:{s:o, s:{}}}}", "servers", "(policy)", "tools", tools, "pending"))) {
        free(pins);
        err_set(err, CORDON_E_INTERNAL, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        const char *eq = strrchr(pinned[i], '=');
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(eq - pinned[i]), pinned[i]);
        json_object_set_new(tools, name, json_string(eq + 1));
    }
    pins->fixed = true;
    pins->server = json_object_get(json_object_get(pins->root, "servers"), "(policy)");
    return pins;
}

static json_t *child(json_t *o, const char *key)
{
    json_t *c = json_object_get(o, key);
    if (!json_is_object(c)) {
        c = json_object();
        json_object_set_new(o, key, c);
    }
    return c;
}

void mcp_pins_set_server(struct mcp_pins *pins, const char *identity)
{
    if (pins->fixed)
        return;
    json_t *servers = json_object_get(pins->root, "servers");
    pins->first = !json_is_object(json_object_get(servers, identity));
    pins->server = child(servers, identity);
    child(pins->server, "tools");
    child(pins->server, "pending");
    if (pins->first)
        pins->dirty = true;
}

void mcp_pins_first_done(struct mcp_pins *pins)
{
    pins->first = false;
}

enum pin_verdict mcp_pins_check(struct mcp_pins *pins, const json_t *tool, char digest[65],
                                char old[65])
{
    const char *name = json_string_value(json_object_get(tool, "name"));
    json_t *tools = json_object_get(pins->server, "tools");
    mcp_tool_digest(tool, digest);
    const char *pinned = json_string_value(json_object_get(tools, name));
    snprintf(old, 65, "%s", pinned ? pinned : "");
    if (pinned && !strcmp(pinned, digest))
        return PIN_OK;
    if (!pinned && pins->first) {
        json_object_set_new(tools, name, json_string(digest));
        pins->dirty = true;
        return PIN_FIRST;
    }
    enum pin_verdict v = pinned ? PIN_CHANGED : PIN_NEW;
    json_t *pending = json_object_get(pins->server, "pending");
    json_t *was = json_object_get(pending, name);
    if (!was || strcmp(json_string_value(json_object_get(was, "digest")) ?: "", digest) != 0) {
        char ts[32];
        time_t now = time(NULL);
        struct tm tm;
        strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
        json_object_set_new(pending, name,
                            json_pack("{s:s, s:s, s:O, s:s}", "digest", digest, "kind",
                                      pin_verdict_name(v), "tool", tool, "seen", ts));
        pins->dirty = true;
    }
    return v;
}

static int save(const char *path, json_t *root, struct cordon_err *err)
{
    _cleanup_free_ char *text = json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS);
    if (!text)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    size_t n = strlen(text);
    text[n] = '\n';
    int rc = hostpath_replace_file(path, text, n + 1, err);
    text[n] = '\0';
    return rc < 0 ? err_prefix(err, "tool pins") : 0;
}

int mcp_pins_save(struct mcp_pins *pins, struct cordon_err *err)
{
    if (!pins->dirty || pins->fixed)
        return 0;
    TRY(save(pins->path, pins->root, err));
    pins->dirty = false;
    return 0;
}

void mcp_pins_free(struct mcp_pins *pins)
{
    if (!pins)
        return;
    json_decref(pins->root);
    free(pins->path);
    free(pins);
}

static bool named(const char *name, char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(names[i], name))
            return true;
    return n == 0;
}

int mcp_pins_approve(const char *path, const char *server, char *const *names, size_t n,
                     size_t *approved, struct cordon_err *err)
{
    *approved = 0;
    json_auto_t *root = load(path, err);
    if (!root)
        return -1;
    const char *id;
    json_t *s;
    json_object_foreach(json_object_get(root, "servers"), id, s)
    {
        if (server && strcmp(server, id) != 0)
            continue;
        json_t *pending = child(s, "pending"), *tools = child(s, "tools");
        const char *name;
        json_t *p, *tmp;
        json_object_foreach_safe(pending, tmp, name, p)
        {
            if (!named(name, names, n))
                continue;
            json_object_set(tools, name, json_object_get(p, "digest"));
            json_object_del(pending, name);
            (*approved)++;
        }
    }
    if (!*approved)
        return err_set(err, CORDON_E_USAGE, "tool pins '%s': nothing pending to approve%s", path,
                       server || n ? " by that name" : "");
    return save(path, root, err);
}
