/*
 * policy/policy_presets.c: egress rules as network.allow takes them, presets
 * among them. "@npm" (--allow @npm, or network.allow: ["@npm"]) stands for
 * a named, versioned set of rules shipped as a data file (data/presets/
 * NAME.yaml, installed in DATADIR/cordon/presets), read once, when the
 * policy is loaded. Its rules land in network.allow like any other, so the
 * policy's digest covers what the preset said on this host; its name and
 * version are kept (network.presets in the policy's JSON, and so in every
 * run.start). Runs in the CLI or supervisor.
 */
#include "policy/policy_int.h"

#include "common/cleanup.h"
#include "common/hostpath.h"
#include "common/installed.h"
#include "common/text.h"

#include <libfyaml.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A preset is a page of rules; anything larger is a mistake. */
#define PRESET_MAX_BYTES 65536
#define PRESET_MAX_RULES 64
#define PRESET_NAME_MAX 32

/* The canonical text of rule TEXT into CANON; request rules only in network.allow. */
static int rule_text(const char *path, const char *text, char canon[EGRESS_RULE_TEXT_MAX],
                     char *why, size_t len)
{
    struct egress_rule r;
    if (egress_rule_parse(text, &r, why, len) < 0)
        return -1;
    if (egress_rule_is_request_rule(&r) && strcmp(path, "network.allow") != 0)
        return why_printf(why, len,
                          "a method or a path limits only what network.allow lets "
                          "through, not %s: \"%s\"",
                          path, text);
    egress_rule_format(&r, canon, EGRESS_RULE_TEXT_MAX);
    return 0;
}

/*
 * The directory presets are read from: beside the executable (a copied
 * cordon with its presets), in a build tree (data/presets), else where
 * `meson install` put them. Never one the caller names: a signed policy's
 * "@npm" must mean what the host's cordon ships.
 */
static int presets_dir(char out[PATH_MAX])
{
    char exe[PATH_MAX - 32];
    if (installed_exe_dir(exe, sizeof exe) == 0) {
        snprintf(out, PATH_MAX, "%s/presets", exe);
        if (access(out, R_OK | X_OK) == 0)
            return 0;
        snprintf(out, PATH_MAX, "%s/data/presets", exe);
        if (access(out, R_OK | X_OK) == 0)
            return 0;
    }
    return installed_data_path("presets", out);
}

/* "crates, debian, ..." : the presets DIR holds, sorted, into BUF. */
static void list_presets(const char *dir, char *buf, size_t len)
{
    struct dirent **names = NULL;
    int n = scandir(dir, &names, NULL, alphasort);
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        size_t l = strlen(names[i]->d_name);
        if (l > 5 && strcmp(names[i]->d_name + l - 5, ".yaml") == 0 && o < len)
            o += (size_t)snprintf(buf + o, len - o, "%s%.*s", o ? ", " : "", (int)(l - 5),
                                  names[i]->d_name);
        free(names[i]);
    }
    free(names);
    if (!buf[0])
        snprintf(buf, len, "none in %.256s", dir);
}

static void document_destroyp(struct fy_document **d)
{
    if (*d)
        fy_document_destroy(*d);
}

/* The whole of FILE (at most PRESET_MAX_BYTES), NUL-terminated; NULL with WHY. */
static char *read_preset(const char *file, size_t *n, char *why, size_t len)
{
    _cleanup_close_ int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        why_printf(why, len, "cannot read '%s': %s", file, strerror(errno));
        return NULL;
    }
    /* Room for one byte more than the most: a file that fills it is larger. */
    char *text = malloc(PRESET_MAX_BYTES + 2);
    ssize_t got = text ? read_small_fd(fd, text, PRESET_MAX_BYTES + 2) : -1;
    if (got < 0 || got > PRESET_MAX_BYTES) {
        free(text);
        why_printf(why, len, "cannot read '%s' (at most %d bytes)", file, PRESET_MAX_BYTES);
        return NULL;
    }
    *n = (size_t)got;
    return text;
}

/* A scalar's text, NUL-terminated, or NULL when N is none. */
static const char *scalar(struct fy_node *n)
{
    return n && fy_node_is_scalar(n) ? fy_node_get_scalar0(n) : NULL;
}

/*
 * Read FILE into PR: name (NAME's), version (an integer from 1), a
 * description, and allow: a list of rules, each as network.allow takes it
 * (request rules included, no preset within a preset). Any other key is an
 * error, as in a policy.
 */
static int load_preset(const char *file, const char *name, struct policy_preset *pr, char *why,
                       size_t len)
{
    size_t n = 0;
    _cleanup_free_ char *text = read_preset(file, &n, why, len);
    if (!text)
        return -1;
    struct fy_parse_cfg cfg = { .flags = FYPCF_QUIET | FYPCF_DEFAULT_VERSION_1_2 };
    _cleanup_(document_destroyp) struct fy_document *doc =
        fy_document_build_from_string(&cfg, text, n);
    struct fy_node *root = doc ? fy_document_root(doc) : NULL;
    if (!root || !fy_node_is_mapping(root))
        return why_printf(why, len, "'%s' is no YAML mapping of name, version, allow", file);
    void *it = NULL;
    struct fy_node_pair *pair;
    struct fy_node *allow = NULL;
    const char *got_name = NULL, *version = NULL;
    while ((pair = fy_node_mapping_iterate(root, &it))) {
        const char *k = scalar(fy_node_pair_key(pair));
        struct fy_node *v = fy_node_pair_value(pair);
        if (k && !strcmp(k, "name"))
            got_name = scalar(v);
        else if (k && !strcmp(k, "version"))
            version = scalar(v);
        else if (k && !strcmp(k, "allow"))
            allow = v;
        else if (!k || strcmp(k, "description") != 0)
            return why_printf(why, len,
                              "'%s': unknown key \"%s\" (known: name, version, "
                              "description, allow)",
                              file, k ? k : "?");
    }
    char *end = NULL;
    unsigned long ver = version ? strtoul(version, &end, 10) : 0;
    if (!got_name || strcmp(got_name, name) != 0 || !version || *end || ver < 1 || ver > 9999 ||
        !allow || !fy_node_is_sequence(allow))
        return why_printf(why, len,
                          "'%s' must name itself \"%s\" and give a version (1 or "
                          "more) and an allow list",
                          file, name);
    pr->version = (unsigned)ver;
    it = NULL;
    struct fy_node *item;
    while ((item = fy_node_sequence_iterate(allow, &it))) {
        const char *rule = scalar(item);
        char canon[EGRESS_RULE_TEXT_MAX], reason[200];
        if (!rule || rule[0] == '@' || pr->n_allow == PRESET_MAX_RULES)
            return why_printf(why, len,
                              "'%s': allow holds at most %d rules, each a rule, no "
                              "preset",
                              file, PRESET_MAX_RULES);
        if (rule_text("network.allow", rule, canon, reason, sizeof reason) < 0)
            return why_printf(why, len, "'%s': %s", file, reason);
        char **grown = realloc(pr->allow, (pr->n_allow + 1) * sizeof *grown);
        if (!grown)
            return POLICY_ENOMEM;
        pr->allow = grown;
        if (!(grown[pr->n_allow] = strdup(canon)))
            return POLICY_ENOMEM;
        pr->n_allow++;
    }
    return pr->n_allow ? 0 : why_printf(why, len, "'%s' allows nothing", file);
}

static void preset_release(struct policy_preset *pr)
{
    free(pr->name);
    free(pr->file);
    for (size_t i = 0; i < pr->n_allow; i++)
        free(pr->allow[i]);
    free(pr->allow);
    *pr = (struct policy_preset){ 0 };
}

void policy_presets_release(struct policy_network *n)
{
    for (size_t i = 0; i < n->n_presets; i++)
        preset_release(&n->presets[i]);
    free(n->presets);
    n->presets = NULL;
    n->n_presets = 0;
}

/* "@NAME" or "@NAME@VERSION": NAME into OUT, the version (0: any) into *VER. */
static int parse_ref(const char *ref, char out[PRESET_NAME_MAX + 1], unsigned *ver, char *why,
                     size_t len)
{
    const char *at = strchr(ref + 1, '@');
    size_t n = at ? (size_t)(at - ref - 1) : strlen(ref + 1);
    char *end = NULL;
    unsigned long v = at ? strtoul(at + 1, &end, 10) : 0;
    bool ok = n > 0 && n <= PRESET_NAME_MAX && (!at || (at[1] && !*end && v >= 1 && v <= 9999));
    for (size_t i = 0; ok && i < n; i++) {
        char c = ref[1 + i];
        ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (c == '-' && i > 0);
    }
    if (!ok)
        return why_printf(why, len,
                          "expected a preset as @NAME or @NAME@VERSION (lower case), "
                          "got \"%s\"",
                          ref);
    memcpy(out, ref + 1, n);
    out[n] = '\0';
    *ver = (unsigned)v;
    return 0;
}

/* Add the rules of preset REF ("@npm", "@npm@1") to network.allow, once. */
static int add_preset(struct policy *p, const char *ref, char *why, size_t len)
{
    char name[PRESET_NAME_MAX + 1];
    unsigned want = 0;
    if (parse_ref(ref, name, &want, why, len) < 0)
        return -1;
    struct policy_network *net = &p->network;
    size_t at = 0;
    while (at < net->n_presets && strcmp(net->presets[at].name, name) < 0)
        at++;
    if (at < net->n_presets && !strcmp(net->presets[at].name, name)) {
        if (want && want != net->presets[at].version)
            return why_printf(why, len, "preset \"@%s\" is version %u here, not %u", name,
                              net->presets[at].version, want);
        return 0; /* named twice: its rules are in already */
    }
    char dir[PATH_MAX], file[PATH_MAX + 64];
    if (presets_dir(dir) < 0)
        return why_printf(why, len, "no presets directory for \"%s\"", ref);
    snprintf(file, sizeof file, "%s/%s.yaml", dir, name);
    if (access(file, F_OK) < 0) {
        char known[400];
        list_presets(dir, known, sizeof known);
        return why_printf(why, len, "unknown preset \"@%s\" (presets here: %s)", name, known);
    }
    struct policy_preset pr = { 0 };
    int rc = load_preset(file, name, &pr, why, len);
    if (rc == 0 && want && want != pr.version)
        rc = why_printf(why, len, "preset \"@%s\" is version %u here, not %u", name, pr.version,
                        want);
    if (rc == 0 && (!(pr.name = strdup(name)) || !(pr.file = strdup(file))))
        rc = POLICY_ENOMEM;
    for (size_t i = 0; rc == 0 && i < pr.n_allow; i++)
        rc = policy_strv_add(&net->allow, &net->n_allow, pr.allow[i]);
    struct policy_preset *grown =
        rc == 0 ? realloc(net->presets, (net->n_presets + 1) * sizeof *grown) : NULL;
    if (rc == 0 && !grown)
        rc = POLICY_ENOMEM;
    if (rc < 0) {
        preset_release(&pr);
        return rc;
    }
    memmove(grown + at + 1, grown + at, (net->n_presets - at) * sizeof *grown);
    grown[at] = pr;
    net->presets = grown;
    net->n_presets++;
    return 0;
}

int policy_net_add_rule(struct policy *p, const char *path, const char *text, char *why, size_t len)
{
    if (text[0] == '@') {
        if (strcmp(path, "network.allow") != 0)
            return why_printf(why, len, "a preset (\"%s\") goes in network.allow only", text);
        return add_preset(p, text, why, len);
    }
    char canon[EGRESS_RULE_TEXT_MAX];
    if (rule_text(path, text, canon, why, len) < 0)
        return -1;
    struct policy_network *n = &p->network;
    if (strcmp(path, "network.deny") == 0)
        return policy_strv_add(&n->deny, &n->n_deny, canon);
    if (strcmp(path, "network.ask") == 0)
        return policy_strv_add(&n->ask, &n->n_ask, canon);
    return policy_strv_add(&n->allow, &n->n_allow, canon);
}

json_t *policy_presets_json(const struct policy_network *n, bool whole)
{
    json_t *out = whole ? json_object() : json_array();
    for (size_t i = 0; out && i < n->n_presets; i++) {
        const struct policy_preset *pr = &n->presets[i];
        if (!whole) {
            char ref[PRESET_NAME_MAX + 16];
            snprintf(ref, sizeof ref, "%s@%u", pr->name, pr->version);
            json_array_append_new(out, json_string(ref));
            continue;
        }
        json_t *allow = json_array();
        for (size_t k = 0; allow && k < pr->n_allow; k++)
            json_array_append_new(allow, json_string(pr->allow[k]));
        json_object_set_new(out, pr->name,
                            json_pack("{s:i, s:s, s:o*}", "version", (int)pr->version, "file",
                                      pr->file, "allow", allow));
    }
    return out;
}
