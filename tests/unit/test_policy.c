/*
 * tests/unit/test_policy.c: policy text and flag values in, exact effective
 * values or exact diagnostics out. Host paths live in a mkdtemp() directory;
 * "@T" in a case stands for it.
 */
#include "policy/policy.h"

#include "tap.h"

#include <openssl/evp.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmp[4096];

/* "@T" -> the test directory. The caller frees. */
static char *expand(const char *s)
{
    size_t n = 0;
    for (const char *p = s; *p; p++)
        n += (p[0] == '@' && p[1] == 'T') ? strlen(tmp) : 1;
    char *out = malloc(n + 1), *o = out;
    for (const char *p = s; *p; p++) {
        if (p[0] == '@' && p[1] == 'T') {
            o = stpcpy(o, tmp);
            p++;
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
    return out;
}

/* A message ending in '*' is matched as a prefix (text owned by another module). */
static void is_msg(const char *got, const char *want_raw, const char *name)
{
    char *want = expand(want_raw);
    size_t n = strlen(want);
    if (n && want[n - 1] == '*') {
        bool same = strncmp(got, want, n - 1) == 0;
        ok(same, "%s", name);
        if (!same)
            printf("#   got:  %s\n#   want: %s\n", got, want);
    } else {
        is_str(got, want, name);
    }
    free(want);
}

/* The compact, sorted JSON of one top-level section of P's effective policy. */
static char *section_json(const struct policy *p, const char *section)
{
    json_t *j = policy_to_json(p);
    char *s =
        json_dumps(json_object_get(j, section), JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    json_decref(j);
    return s;
}

struct load_case {
    const char *text;
    const char *err;     /* expected message, or NULL: loads */
    const char *section; /* on success: this section's JSON ... */
    const char *json;    /* ... must be exactly this */
};

#define LIMITS(wall, cpu, mem, pids, out, fsz, nofile, be, def)                                \
    "{\"best_effort\":[" be "],\"cpu_ms\":" #cpu ",\"defaults\":[" def "],\"file_size\":" #fsz \
    ",\"memory\":" #mem ",\"open_files\":" #nofile ",\"output\":" #out ",\"pids\":" #pids      \
    ",\"wall_ms\":" #wall "}"
/* The defaults table: 10m wall and CPU, 1G memory, 256 pids, 16M output, 1G files. */
#define ALL_LIMITS "\"wall\",\"cpu\",\"memory\",\"pids\",\"output\",\"file_size\",\"open_files\""
#define LIMITS_DEFAULT(be) \
    LIMITS(600000, 600000, 1073741824, 256, 16777216, 1073741824, 1024, be, ALL_LIMITS)
#define PROTECTED_DEFAULT                                                              \
    "\".aider.conf.yml\",\".aws\",\".bash_login\",\".bash_logout\",\".bash_profile\"," \
    "\".bashrc\",\".claude\",\".codex\",\".config\",\".continue\","                    \
    "\".continuerc.json\",\".cshrc\",\".cursor\",\".devcontainer\","                   \
    "\".devcontainer.json\",\".env\",\".env*\",\".envrc\",\".exrc\",\".gemini\","      \
    "\".git\",\".gitconfig\",\".githooks\","                                           \
    "\".husky\",\".idea\",\".irbrc\",\".kube\",\".lefthook\",\".lefthook-local.yml\"," \
    "\".lefthook.yml\",\".login\",\".mcp.json\",\".mise\",\".mise.local.toml\","       \
    "\".mise.toml\",\".node-version\",\".nvim.lua\",\".nvimrc\",\".nvmrc\","           \
    "\".pdbrc\",\".pre-commit-config.yaml\",\".profile\",\".pryrc\","                  \
    "\".python-version\",\".ruby-version\",\".sdkmanrc\",\".ssh\",\".tcshrc\","        \
    "\".tool-versions\",\".vscode\",\".zlogin\",\".zlogout\",\".zprofile\","           \
    "\".zshenv\",\".zshrc\",\"lefthook-local.yml\",\"lefthook.yml\",\"mise\","         \
    "\"mise.local.toml\",\"mise.toml\""
#define FS_ALLPS(ws, wss, wsi, tmps, tmpi, shms, shmi, ro, rw, prot, unprot, socks)      \
    "{\"protected\":[" prot "],\"read_only\":[" ro "],\"read_write\":[" rw               \
    "],\"shm_inodes\":" #shmi ",\"shm_size\":" #shms ",\"tmp_inodes\":" #tmpi            \
    ",\"tmp_size\":" #tmps ",\"unix_sockets\":[" socks "],\"unsafe_unprotect\":[" unprot \
    "],\"workspace\":" ws ",\"workspace_inodes\":" #wsi ",\"workspace_size\":" #wss "}"
#define FS_ALLP(ws, wss, wsi, tmps, tmpi, shms, shmi, ro, rw, prot, unprot) \
    FS_ALLPS(ws, wss, wsi, tmps, tmpi, shms, shmi, ro, rw, prot, unprot, "")
#define FS_SOCKS(socks)                                                                            \
    FS_ALLPS("null", 268435456, 65536, 67108864, 16384, 67108864, 4096, "", "", PROTECTED_DEFAULT, \
             "", socks)
#define FS_ALL(ws, wss, wsi, tmps, tmpi, shms, shmi, ro, rw) \
    FS_ALLP(ws, wss, wsi, tmps, tmpi, shms, shmi, ro, rw, PROTECTED_DEFAULT, "")
#define FSP(ws, wss, tmps, ro, rw, prot, unprot) \
    FS_ALLP(ws, wss, 65536, tmps, 16384, 67108864, 4096, ro, rw, prot, unprot)
#define FS(ws, wss, tmps, ro, rw) FSP(ws, wss, tmps, ro, rw, PROTECTED_DEFAULT, "")
#define FS_DEFAULT_SIZES(ro, rw) FS("null", 268435456, 67108864, ro, rw)
#define BIND(src, dst) "{\"dest\":\"" dst "\",\"source\":\"" src "\"}"

#define KNOWN_TOP                                                                            \
    "unknown key; known: version, isolation, filesystem, workspace, env, limits, syscalls, " \
    "microvm, network, "                                                                     \
    "secrets, tools, audit, require_signature, decider, break_glass"
#define AUDIT(file, key, every, fsync)                                                             \
    "{\"checkpoint_every\":" #every ",\"file\":" file ",\"fsync\":\"" fsync "\",\"sign_key\":" key \
    "}"
#define AUDIT_DEFAULT AUDIT("null", "null", 0, "close")
#define TOOLS(allow, rules, calls, result, message, timeout, args, res, prompts, logging,    \
              sampling, elicit, roots)                                                       \
    "{\"allow\":[" allow "],\"call_timeout_ms\":" #timeout ",\"elicitation\":" #elicit       \
    ",\"logging\":" #logging ",\"max_calls\":" #calls ",\"max_message_bytes\":" #message     \
    ",\"max_result_bytes\":" #result ",\"prompts\":" #prompts ",\"record_arguments\":" #args \
    ",\"resources\":" #res ",\"roots\":" #roots ",\"rules\":{" rules "},"                    \
    "\"sampling\":" #sampling "}"
#define TOOLS_ALLOW(allow, rules) \
    TOOLS(allow, rules, 0, 4194304, 8388608, 300000, false, false, false, true, false, false, false)
#define ARG_RULE(under, deny, max, pattern) \
    "{\"deny\":[" deny "],\"max_length\":" #max ",\"pattern\":" pattern ",\"under\":[" under "]}"
#define KNOWN_TOOLS                                                                               \
    "unknown key; known: allow, rules, max_calls, max_result_bytes, max_message_bytes, "          \
    "call_timeout, record_arguments, resources, prompts, logging, sampling, elicitation, roots, " \
    "ask, pins, pinned"
#define NET(mode, allow, deny, priv, resolve, req, bytes, conns, rate)                   \
    "{\"allow\":[" allow "],\"allow_private\":[" priv "],\"budgets\":{\"bytes\":" #bytes \
    ",\"connections\":" #conns ",\"request_rate\":" #rate ",\"requests\":" #req          \
    "},\"deny\":[" deny "],\"dns\":[],\"mode\":\"" mode "\",\"resolve\":[" resolve       \
    "],\"upstream_ca\":null}"
#define NET_DEFAULT NET("none", "", "", "", "", 0, 0, 0, 0)
#define NET_ALLOW(allow) NET("gateway", allow, "", "", "", 0, 0, 0, 0)
#define KNOWN_NETWORK                                                                   \
    "unknown key; known: mode, allow, deny, ask, allow_private, resolve, dns, expose, " \
    "upstream_ca, budgets"
#define KNOWN_BUDGETS "unknown key; known: requests, bytes, connections, request_rate"
#define SECRET(name, from, hosts, ttl) \
    "{\"from\":\"" from "\",\"hosts\":[" hosts "],\"name\":\"" name "\",\"ttl_ms\":" #ttl "}"
#define GH_HOSTS "\"*.github.com:8443\",\"api.github.com:443\""
#define ONE_SECRET(name) "  - {name: " name ", from: \"env:GH_TOKEN\", hosts: [a.test]}\n"
#define KNOWN_SECRET "unknown key; known: name, from, hosts, ttl"
#define REFERENCE "expected env:VAR or file:PATH, a reference to where the value is, not the value"
#define KNOWN_LIMITS \
    "unknown key; known: wall, cpu, memory, output, file_size, pids, open_files, best_effort"

static const struct load_case load_cases[] = {
    /* version and isolation */
    { "version: 1\n", NULL, "version", "1" },
    /* a last line of blanks without a line break (libfyaml 0.7.12 refused it) */
    { "{\"version\": 1}\n\t", NULL, "version", "1" },
    { "version: 1\r\n \t", NULL, "version", "1" },
    { "version: 1\n", NULL, "isolation", "\"namespace\"" },
    { "version: 1\nisolation: process\n", NULL, "isolation", "\"process\"" },
    { "version: 1\nisolation: namespace\n", NULL, "isolation", "\"namespace\"" },
    { "version: 1\nisolation: gvisor\n", NULL, "isolation", "\"gvisor\"" },
    { "version: 1\nisolation: microvm\n", NULL, "isolation", "\"microvm\"" },
    { "version: 1\nisolation: vm\n",
      "policy.yaml:2: isolation: expected one of process, namespace, gvisor, microvm, got \"vm\"" },
    { "isolation: process\n", "policy.yaml: version: missing; add \"version: 1\"" },
    /* a list: explicit fallbacks, tried in order */
    { "version: 1\nisolation: [namespace, process]\n", NULL, "isolation",
      "[\"namespace\",\"process\"]" },
    { "version: 1\nisolation: [process]\n", NULL, "isolation", "\"process\"" },
    { "version: 1\nisolation: [process, process]\n",
      "policy.yaml:2: isolation: \"process\" is listed twice" },
    { "version: 1\nisolation: [namespace, vm]\n",
      "policy.yaml:2: isolation: expected one of process, namespace, gvisor, microvm, got \"vm\"" },
    { "version: 1\nisolation: []\n",
      "policy.yaml:2: isolation: expected at least one level, got an empty list" },
    { "version: 1\nisolation: [\"namespace,process\"]\n",
      "policy.yaml:2: isolation[0]: expected a level name, got \"namespace,process\"" },
    { "isolation: process\nversion: 2\n",
      "policy.yaml:2: version: unsupported version 2 (this cordon reads version 1)" },
    { "version: one\n", "policy.yaml:1: version: expected a whole number, got \"one\"" },
    { "version:\n", "policy.yaml:1: version: expected 1, got null" },
    { "version: [1]\n", "policy.yaml:1: version: expected 1, got a list" },

    /* the document itself */
    { "", "policy.yaml: empty policy; it needs at least \"version: 1\"" },
    /* malformed UTF-8 never reaches libfyaml, which loops forever on the first */
    { "%Y\xfe\n", "policy.yaml:1: not UTF-8: byte 0xfe is not part of a valid sequence" },
    { "version: 1\nenv:\n  set: { A: \"caf\xc3\" }\n",
      "policy.yaml:3: not UTF-8: byte 0xc3 is not part of a valid sequence" },
    { "version: 1\nenv:\n  set: { A: \"\xed\xa0\x80\" }\n",
      "policy.yaml:3: not UTF-8: byte 0xed is not part of a valid sequence" },
    { "version: 1\nenv:\n  set: { A: \"\x1b[2J\" }\n",
      "policy.yaml:3: character U+001B cannot appear in YAML or JSON text (write it escaped "
      "in a double-quoted string)" },
    { "version: 1\nenv:\n  set: { A: \"\xc2\x9b\" }\n",
      "policy.yaml:3: character U+009B cannot appear in YAML or JSON text (write it escaped "
      "in a double-quoted string)" },
    { "version: 1\nenv:\n  set: { A: \"\\e\\t\" }\n", NULL, "env",
      "{\"pass\":[],\"set\":{\"A\":\"\\u001B\\t\"}}" },
    /* tags: YAML would read "read_only: !" as "", the loader as the default */
    { "version: 1\nfilesystem:\n  read_only: !\n",
      "policy.yaml:3: YAML tags are not supported, got \"!\"" },
    { "version: 1\nlimits:\n  wall: !!str 10s\n",
      "policy.yaml:3: YAML tags are not supported, got \"tag:yaml.org,2002:str\"" },
    { "version: 1\n!x limits: {}\n", "policy.yaml:2: YAML tags are not supported, got \"!x\"" },
    { "version: 1\nenv:\n  set: { A: \"caf\xc3\xa9\" }\n", NULL, "env",
      "{\"pass\":[],\"set\":{\"A\":\"caf\xc3\xa9\"}}" },
    { "# nothing\n", "policy.yaml: empty policy; it needs at least \"version: 1\"" },
    { "- version: 1\n", "policy.yaml:1: expected a mapping of policy keys, got a list" },
    { "version: 1\nlimits: {memory: 1G\n", "policy.yaml:3: invalid YAML: *" },
    { "version: 1\nversion: 1\n", "policy.yaml:2: invalid YAML: duplicate key" },
    /* A key twice is an error at every depth and in every spelling, never "last wins"
     * (libfyaml refuses it while FYPCF_ALLOW_DUPLICATE_KEYS is not given). */
    { "version: 1\nlimits:\n  memory: 1G\n  memory: unlimited\n",
      "policy.yaml:4: invalid YAML: duplicate key" },
    { "version: 1\nlimits:\n  memory: 1G\n  \"memory\": unlimited\n",
      "policy.yaml:4: invalid YAML: duplicate key" },
    { "version: 1\nlimits: {memory: 1G}\nlimits: {memory: unlimited}\n",
      "policy.yaml:3: invalid YAML: duplicate key" },
    { "version: 1\nenv:\n  set:\n    A: x\n    'A': y\n",
      "policy.yaml:5: invalid YAML: duplicate key" },
    { "version: 1\nfilesystem:\n  read_only:\n    - {source: /usr, source: /etc}\n",
      "policy.yaml:4: invalid YAML: duplicate key" },
    { "{\"version\": 1, \"network\": {\"mode\": \"none\", \"mode\": \"gateway\"}}\n",
      "policy.yaml:1: invalid YAML: duplicate key" },
    { "{\"version\": 1, \"limits\": {\"pids\": 5, \"p\\u0069ds\": 9999}}\n",
      "policy.yaml:1: invalid YAML: duplicate key" },
    { "version: 1\n\tlimits: {}\n", "policy.yaml:1: invalid YAML: *" },
    { "version: 1\n---\nversion: 1\n", "policy.yaml: more than one YAML document" },
    { "version: 1\nlimits: &l {}\nsyscalls: *l\n",
      "policy.yaml:3: syscalls: YAML aliases are not supported" },

    /* JSON is YAML */
    { "{\"version\": 1, \"limits\": {\"memory\": \"1G\", \"pids\": 64, \"wall\": \"30s\"}}", NULL,
      "limits",
      LIMITS(30000, 600000, 1073741824, 64, 16777216, 1073741824, 1024, "",
             "\"cpu\",\"output\",\"file_size\",\"open_files\"") },
    { "{\n  \"version\": 1,\n  \"limits\": {\"memory\": \"lots\"}\n}",
      "policy.yaml:3: limits.memory: expected a size like 256M, got \"lots\"" },

    /* unknown and reserved keys */
    { "version: 1\nfoo: 1\n", "policy.yaml:2: foo: " KNOWN_TOP },
    { "version: 1\nlimits:\n  memroy: 1G\n", "policy.yaml:3: limits.memroy: " KNOWN_LIMITS },
    { "version: 1\nlimits.memory: 1G\n", "policy.yaml:2: limits.memory: " KNOWN_TOP },
    { "version: 1\nenv:\n  keep: [A]\n", "policy.yaml:3: env.keep: unknown key; known: pass, set" },
    { "version: 1\naudit:\n  record_arguments: true\n",
      "policy.yaml:3: audit.record_arguments: moved to tools.record_arguments" },

    /* tools: what the MCP broker forwards */
    { "version: 1\n", NULL, "tools", TOOLS_ALLOW("", "") },
    { "version: 1\ntools: {}\n", NULL, "tools", TOOLS_ALLOW("", "") },
    { "version: 1\ntools: []\n", "policy.yaml:2: tools: expected a mapping, got a list" },
    { "version: 1\ntools:\n  allow: [read_text_file, list_directory, read_text_file]\n", NULL,
      "tools", TOOLS_ALLOW("\"list_directory\",\"read_text_file\"", "") },
    { "version: 1\ntools:\n  allow: ['*']\n", NULL, "tools", TOOLS_ALLOW("\"*\"", "") },
    { "version: 1\ntools:\n  allow: [\"a b\"]\n",
      "policy.yaml:3: tools.allow[0]: \"a b\" is not a tool name (expected letters, digits, _ - . "
      "/)" },
    { "version: 1\ntools:\n  allow: [\"\"]\n",
      "policy.yaml:3: tools.allow[0]: \"\" is not a tool name (1 to 128 characters)" },
    { "version: 1\ntools:\n  allow: read\n",
      "policy.yaml:3: tools.allow: expected a list of tool names, got a single value" },
    { "version: 1\ntools:\n  alow: [x]\n", "policy.yaml:3: tools.alow: " KNOWN_TOOLS },
    { "version: 1\ntools:\n  allow: [read_text_file, search_files]\n  rules:\n"
      "    read_text_file:\n      path: { under: [/workspace/, /data//x/.], deny: [\"**/.env\", "
      "\"**/.git/**\"] }\n"
      "    search_files:\n      pattern: { max_length: 200, pattern: '^[a-z*]+$' }\n"
      "  max_calls: 500\n  max_result_bytes: 1M\n  max_message_bytes: 2M\n  call_timeout: 30s\n"
      "  record_arguments: true\n  resources: true\n  prompts: true\n  logging: false\n"
      "  sampling: true\n  elicitation: true\n  roots: true\n",
      NULL, "tools",
      TOOLS("\"read_text_file\",\"search_files\"",
            "\"read_text_file\":{\"path\":" ARG_RULE(
                "\"/data/x\",\"/workspace\"", "\"**/.env\",\"**/.git/**\"", 0,
                "null") "},"
                        "\"search_files\":{\"pattern\":" ARG_RULE("", "", 200, "\"^[a-z*]+$\"") "}",
            500, 1048576, 2097152, 30000, true, true, true, false, true, true, true) },
    { "version: 1\ntools:\n  allow: [a]\n  rules:\n    b:\n      path: { under: [/w] }\n",
      "policy.yaml: tools: rules for \"b\", which is not in tools.allow" },
    { "version: 1\ntools:\n  allow: ['*']\n  rules:\n    b:\n      path: { under: [/w] }\n", NULL,
      "tools", TOOLS_ALLOW("\"*\"", "\"b\":{\"path\":" ARG_RULE("\"/w\"", "", 0, "null") "}") },
    { "version: 1\ntools:\n  allow: [a]\n  rules:\n    a:\n      path: { under: [w] }\n",
      "policy.yaml:6: tools.rules.a.path.under[0]: \"w\" is not an absolute path" },
    { "version: 1\ntools:\n  allow: [a]\n  rules:\n    a:\n      path: { under: [/w/../x] }\n",
      "policy.yaml:6: tools.rules.a.path.under[0]: \"/w/../x\" contains \"..\"" },
    { "version: 1\ntools:\n  allow: [a]\n  rules:\n    a:\n      path: {}\n",
      "policy.yaml:6: tools.rules.a.path: an empty rule; give under, deny, max_length or pattern" },
    { "version: 1\ntools:\n  allow: [a]\n  rules:\n    a:\n      path: { undr: [/w] }\n",
      "policy.yaml:6: tools.rules.a.path.undr: unknown key; known: under, deny, max_length, "
      "pattern" },
    { "version: 1\ntools:\n  allow: [a]\n  rules:\n    a:\n      q: { pattern: '(' }\n",
      "policy.yaml:6: tools.rules.a.q.pattern: pattern \"(\" does not compile at offset 1: "
      "missing closing parenthesis" },
    { "version: 1\ntools:\n  allow: [a]\n  rules:\n    a:\n      q: { max_length: 0 }\n",
      "policy.yaml:6: tools.rules.a.q.max_length: expected a length of at least 1, got \"0\"" },
    { "version: 1\ntools:\n  allow: [a]\n  rules:\n    a:\n      q: { deny: [\"\"] }\n",
      "policy.yaml:6: tools.rules.a.q.deny[0]: expected a glob pattern, got \"\"" },
    { "version: 1\ntools:\n  allow: [a]\n  rules:\n    a: [x]\n",
      "policy.yaml:5: tools.rules.a: expected a mapping of ARGUMENT: rule, got a list" },
    { "version: 1\ntools:\n  allow: [a]\n  rules:\n    a:\n      q: /w\n",
      "policy.yaml:6: tools.rules.a.q: expected a mapping of under, deny, max_length, pattern, "
      "got a single value" },
    { "version: 1\ntools:\n  max_message_bytes: 10\n",
      "policy.yaml:3: tools.max_message_bytes: must be at least 4096, got \"10\"" },
    { "version: 1\ntools:\n  sampling: maybe\n",
      "policy.yaml:3: tools.sampling: expected true or false, got \"maybe\"" },

    /* network: modes and the implied gateway */
    { "version: 1\n", NULL, "network", NET_DEFAULT },
    { "version: 1\nnetwork:\n", NULL, "network", NET_DEFAULT },
    { "version: 1\nnetwork: {}\n", NULL, "network", NET_DEFAULT },
    { "version: 1\nnetwork:\n  mode: none\n", NULL, "network", NET_DEFAULT },
    { "version: 1\nnetwork:\n  mode: gateway\n", NULL, "network",
      NET("gateway", "", "", "", "", 0, 0, 0, 0) },
    { "version: 1\nnetwork:\n  allow: [api.example.com]\n", NULL, "network",
      NET_ALLOW("\"api.example.com\"") },
    { "version: 1\nnetwork:\n  mode: gateway\n  allow: [api.example.com]\n", NULL, "network",
      NET_ALLOW("\"api.example.com\"") },
    { "version: 1\nnetwork:\n  deny: [evil.example.com]\n", NULL, "network",
      NET("none", "", "\"evil.example.com\"", "", "", 0, 0, 0, 0) },
    { "version: 1\nnetwork:\n  mode: none\n  allow: [api.example.com]\n",
      "policy.yaml: network.allow: needs mode gateway (mode is none)" },
    { "version: 1\nnetwork:\n  allow: [api.example.com]\n  mode: none\n",
      "policy.yaml: network.allow: needs mode gateway (mode is none)" },
    { "version: 1\nnetwork:\n  mode: open\n",
      "policy.yaml:3: network.mode: expected one of none, gateway, got \"open\"" },
    { "version: 1\nnetwork:\n  mode: [gateway]\n",
      "policy.yaml:3: network.mode: expected one of none, gateway, got a list" },

    /* network: every field, canonical, sorted, de-duplicated */
    { "version: 1\nnetwork:\n  mode: gateway\n"
      "  allow: [\"api.example.com\", \"*.example.com:8443\", \"10.0.0.0/8:5432\", \"[::1]:80\"]\n"
      "  deny: [secret.example.com]\n"
      "  allow_private: [\"127.0.0.2/32\", \"fd00::/8\"]\n"
      "  resolve: [\"api.example.com=127.0.0.2\"]\n"
      "  budgets: {requests: 100, bytes: 100M, connections: 4, request_rate: 10}\n",
      NULL, "network",
      NET("gateway", "\"*.example.com:8443\",\"10.0.0.0/8:5432\",\"[::1]:80\",\"api.example.com\"",
          "\"secret.example.com\"", "\"127.0.0.2/32\",\"fd00::/8\"",
          "\"api.example.com=127.0.0.2\"", 100, 104857600, 4, 10) },
    { "version: 1\nnetwork:\n"
      "  allow: [\" API.Example.com. \", api.example.com, \"*.EXAMPLE.com:8443\", "
      "\"api.example.com\"]\n",
      NULL, "network", NET_ALLOW("\"*.example.com:8443\",\"api.example.com\"") },
    { "version: 1\nnetwork:\n  allow: [\"10.1.2.3/8\", \"0x7f.1:8080\", \"[0:0::1]\", "
      "10.0.0.0/8]\n",
      NULL, "network", NET_ALLOW("\"10.0.0.0/8\",\"127.0.0.1:8080\",\"[::1]\"") },
    /* network.ask: canonical like allow, and it implies the gateway */
    { "version: 1\nnetwork:\n  ask: [\" B.example.com. \", \"*.A.test:8443\", b.example.com]\n"
      "decider:\n  socket: /tmp/decider.sock\n",
      NULL, "network",
      "{\"allow\":[],\"allow_private\":[],\"ask\":[\"*.a.test:8443\",\"b.example.com\"],"
      "\"budgets\":{\"bytes\":0,\"connections\":0,\"request_rate\":0,\"requests\":0},"
      "\"deny\":[],\"dns\":[],\"mode\":\"gateway\",\"resolve\":[],\"upstream_ca\":null}" },
    { "version: 1\nnetwork:\n  ask: [a.test]\n",
      "policy.yaml: network.ask: needs decider.socket (the gateway cannot run decider.command)" },
    { "version: 1\nnetwork:\n  deny: [B.example.com, a.example.com, b.example.com.]\n", NULL,
      "network", NET("none", "", "\"a.example.com\",\"b.example.com\"", "", "", 0, 0, 0, 0) },
    { "version: 1\nnetwork:\n  allow_private: [\" 127.0.0.2/32 \", 127.0.0.2, 10.9.9.9/8, "
      "\"FD00::/8\"]\n",
      NULL, "network",
      NET("none", "", "", "\"10.0.0.0/8\",\"127.0.0.2/32\",\"fd00::/8\"", "", 0, 0, 0, 0) },
    { "version: 1\nnetwork:\n  resolve:\n    - \"API.example.com.=127.0.0.2\"\n"
      "    - api.example.com=127.0.0.2\n    - \"api.example.com=[0::1]\"\n    - b.test=127.0.0.3\n",
      NULL, "network",
      NET("none", "", "", "",
          "\"api.example.com=127.0.0.2\",\"api.example.com=[::1]\",\"b.test=127.0.0.3\"", 0, 0, 0,
          0) },
    { "{\"version\": 1, \"network\": {\"allow\": [\"a.test\"], \"budgets\": {\"bytes\": 1024}}}",
      NULL, "network", NET("gateway", "\"a.test\"", "", "", "", 0, 1024, 0, 0) },
    { "version: 1\nnetwork:\n  allow: []\n  budgets:\n", NULL, "network", NET_DEFAULT },

    /* network: errors */
    { "version: 1\nnetwork:\n  allowed: [a.test]\n",
      "policy.yaml:3: network.allowed: " KNOWN_NETWORK },
    { "version: 1\nnetwork:\n  budgets:\n    rps: 5\n",
      "policy.yaml:4: network.budgets.rps: " KNOWN_BUDGETS },
    { "version: 1\nnetwork: [a.test]\n", "policy.yaml:2: network: expected a mapping, got a list" },
    { "version: 1\nnetwork:\n  budgets: 5\n",
      "policy.yaml:3: network.budgets: expected a mapping, got a single value" },
    { "version: 1\nnetwork:\n  allow: a.test\n",
      "policy.yaml:3: network.allow: expected a list of HOST[:PORT] rules, got a single value" },
    { "version: 1\nnetwork:\n  allow:\n    - a.test\n    - [b.test]\n",
      "policy.yaml:5: network.allow[1]: expected HOST[:PORT], got a list" },
    { "version: 1\nnetwork:\n  allow:\n    -\n",
      "policy.yaml:3: network.allow[0]: expected HOST[:PORT], got null" },
    { "version: 1\nnetwork:\n  allow:\n    - a.test\n    - \"b.test:99999\"\n",
      "policy.yaml:5: network.allow[1]: bad port in \"b.test:99999\" (expected 1 to 65535)" },
    { "version: 1\nnetwork:\n  allow: [\"a.test:0\"]\n",
      "policy.yaml:3: network.allow[0]: bad port in \"a.test:0\" (expected 1 to 65535)" },
    { "version: 1\nnetwork:\n  allow: [\"a.test:\"]\n",
      "policy.yaml:3: network.allow[0]: empty port in \"a.test:\"" },
    { "version: 1\nnetwork:\n  allow: [\"::1\"]\n",
      "policy.yaml:3: network.allow[0]: IPv6 addresses need brackets: \"::1\"" },
    { "version: 1\nnetwork:\n  allow: [\"\"]\n",
      "policy.yaml:3: network.allow[0]: expected HOST[:PORT], got \"\"" },
    { "version: 1\nnetwork:\n  allow: [\"*.\"]\n",
      "policy.yaml:3: network.allow[0]: bad wildcard in \"*.\" (expected *.example.com)" },
    { "version: 1\nnetwork:\n  deny:\n\n    - \"[fd00::]/8\"\n    - \"x/8\"\n",
      "policy.yaml:6: network.deny[1]: invalid CIDR \"x/8\"" },
    /* request rules: a method and a path hold back what network.allow lets through */
    { "version: 1\nnetwork:\n  allow: [\"HEAD,GET registry.npmjs.org/\", \"POST x.test/a/b/\"]\n",
      NULL, "network", NET_ALLOW("\"GET,HEAD registry.npmjs.org\",\"POST x.test/a/b\"") },
    { "version: 1\nnetwork:\n  deny: [\"x/y\"]\n",
      "policy.yaml:3: network.deny[0]: a method or a path limits only what network.allow lets "
      "through, not network.deny: \"x/y\"" },
    { "version: 1\nnetwork:\n  ask: [\"PUT x.test\"]\n",
      "policy.yaml:3: network.ask[0]: a method or a path limits only what network.allow lets "
      "through, not network.ask: \"PUT x.test\"" },
    /* presets: the rules of data/presets/NAME.yaml, the name and version kept */
    { "version: 1\nnetwork:\n  allow: [\"@npm\", \"@npm@1\", registry.npmjs.org]\n", NULL,
      "network",
      "{\"allow\":[\"GET,HEAD registry.npmjs.org\",\"POST registry.npmjs.org/-/npm/v1/security\","
      "\"registry.npmjs.org\"],\"allow_private\":[],\"budgets\":{\"bytes\":0,\"connections\":0,"
      "\"request_rate\":0,\"requests\":0},\"deny\":[],\"dns\":[],\"mode\":\"gateway\","
      "\"presets\":[\"npm@1\"],\"resolve\":[],\"upstream_ca\":null}" },
    { "version: 1\nnetwork:\n  allow: [\"@nope\"]\n",
      "policy.yaml:3: network.allow[0]: unknown preset \"@nope\" (presets here: crates, debian, "
      "github, go, maven, npm, pypi, rubygems)" },
    { "version: 1\nnetwork:\n  allow: [\"@npm@2\"]\n",
      "policy.yaml:3: network.allow[0]: preset \"@npm\" is version 1 here, not 2" },
    { "version: 1\nnetwork:\n  allow: [\"@../npm\"]\n",
      "policy.yaml:3: network.allow[0]: expected a preset as @NAME or @NAME@VERSION (lower case), "
      "got \"@../npm\"" },
    { "version: 1\nnetwork:\n  deny: [\"@npm\"]\n",
      "policy.yaml:3: network.deny[0]: a preset (\"@npm\") goes in network.allow only" },
    { "version: 1\nnetwork:\n  deny: [\"a b.test\"]\n",
      "policy.yaml:3: network.deny[0]: control character or space in host \"a b.test\"" },
    { "version: 1\nnetwork:\n  allow_private: [10.0.0.0/33]\n",
      "policy.yaml:3: network.allow_private[0]: bad prefix length in CIDR \"10.0.0.0/33\"" },
    { "version: 1\nnetwork:\n  allow_private: [example.com]\n",
      "policy.yaml:3: network.allow_private[0]: invalid CIDR \"example.com\"" },
    { "version: 1\nnetwork:\n  allow_private: [\"[fd00::]/8\", \"[fd00::\"]\n",
      "policy.yaml:3: network.allow_private[1]: invalid CIDR \"[fd00::\"" },
    { "version: 1\nnetwork:\n  resolve: [api.example.com]\n",
      "policy.yaml:3: network.resolve[0]: expected HOST=IP, got \"api.example.com\"" },
    { "version: 1\nnetwork:\n  resolve: [\"=127.0.0.1\"]\n",
      "policy.yaml:3: network.resolve[0]: expected HOST=IP, got \"=127.0.0.1\"" },
    { "version: 1\nnetwork:\n  resolve: [api.example.com=other.test]\n",
      "policy.yaml:3: network.resolve[0]: expected an IP address after '=' in "
      "\"api.example.com=other.test\"" },
    { "version: 1\nnetwork:\n  resolve: [127.0.0.1=127.0.0.2]\n",
      "policy.yaml:3: network.resolve[0]: expected a host name before '=' in "
      "\"127.0.0.1=127.0.0.2\"" },
    { "version: 1\nnetwork:\n  resolve: {api.example.com: 127.0.0.2}\n",
      "policy.yaml:3: network.resolve: expected a list of HOST=IP pins, got a mapping" },

    /* network: budgets */
    { "version: 1\nnetwork:\n  budgets:\n    requests: 1\n    bytes: 1\n    connections: 1\n"
      "    request_rate: 1\n",
      NULL, "network", NET("none", "", "", "", "", 1, 1, 1, 1) },
    { "version: 1\nnetwork:\n  budgets:\n    bytes: 1.5G\n", NULL, "network",
      NET("none", "", "", "", "", 0, 1610612736, 0, 0) },
    { "version: 1\nnetwork:\n  budgets:\n    requests: 0\n",
      "policy.yaml:4: network.budgets.requests: must be greater than 0, got \"0\"" },
    { "version: 1\nnetwork:\n  budgets:\n    bytes: 0\n",
      "policy.yaml:4: network.budgets.bytes: must be greater than 0, got \"0\"" },
    { "version: 1\nnetwork:\n  budgets:\n    bytes: lots\n",
      "policy.yaml:4: network.budgets.bytes: expected a size like 256M, got \"lots\"" },
    { "version: 1\nnetwork:\n  budgets:\n\n    connections: -1\n",
      "policy.yaml:5: network.budgets.connections: expected a whole number, got \"-1\"" },
    { "version: 1\nnetwork:\n  budgets:\n    request_rate: 2.5\n",
      "policy.yaml:4: network.budgets.request_rate: expected a whole number, got \"2.5\"" },
    { "version: 1\nnetwork:\n  budgets:\n    requests: [1]\n",
      "policy.yaml:4: network.budgets.requests: expected a whole number, got a list" },
    { "version: 1\nnetwork:\n  budgets:\n    requests: 99999999999999999999\n",
      "policy.yaml:4: network.budgets.requests: expected a whole number, got "
      "\"99999999999999999999\"" },

    /* secrets: GH_TOKEN is set and CORDON_TEST_EMPTY is "" (main) */
    { "version: 1\n", NULL, "secrets", "[]" },
    { "version: 1\nsecrets:\n", NULL, "secrets", "[]" },
    { "version: 1\nsecrets: []\n", NULL, "network", NET_DEFAULT },
    { "version: 1\nsecrets:\n  - name: GITHUB_TOKEN\n    from: env:GH_TOKEN\n"
      "    hosts: [api.github.com, \"*.GitHub.com:8443\", API.github.com.]\n    ttl: 10m\n",
      NULL, "secrets", "[" SECRET("GITHUB_TOKEN", "env:GH_TOKEN", GH_HOSTS, 600000) "]" },
    { "version: 1\nsecrets:\n  - name: GITHUB_TOKEN\n    from: env:GH_TOKEN\n"
      "    hosts: [api.github.com, \"*.github.com:8443\"]\n",
      NULL, "network", NET_ALLOW(GH_HOSTS) },
    { "version: 1\nnetwork:\n  allow: [b.test]\n  deny: [x.a.test]\nsecrets:\n" ONE_SECRET("A"),
      NULL, "network",
      NET("gateway", "\"a.test:443\",\"b.test\"", "\"x.a.test\"", "", "", 0, 0, 0, 0) },
    { "version: 1\nnetwork:\n  mode: gateway\nsecrets:\n" ONE_SECRET("A"), NULL, "network",
      NET_ALLOW("\"a.test:443\"") },
    { "version: 1\nsecrets:\n  - name: Z\n    from: file:@T//link/../file.txt\n    hosts: "
      "[z.test]\n"
      "    ttl: 1ms\n  - name: _a\n    from: \"file:@T/a@b.txt\"\n    hosts: [\"*.a.test\"]\n"
      "    ttl:\n",
      NULL, "secrets",
      "[" SECRET("Z", "file:@T/file.txt", "\"z.test:443\"",
                 1) "," SECRET("_a", "file:@T/a@b.txt", "\"*.a.test:443\"", 0) "]" },
    { "{\"version\": 1, \"secrets\": [{\"hosts\": [\"b.test\", \"a.test\"], \"ttl\": \"90s\","
      " \"from\": \"env:GH_TOKEN\", \"name\": \"K\"}]}",
      NULL, "secrets",
      "[" SECRET("K", "env:GH_TOKEN", "\"a.test:443\",\"b.test:443\"", 90000) "]" },
    { "{\"version\": 1,\n \"secrets\": [{\"name\": \"K\", \"from\": \"env:GH_TOKEN\",\n"
      " \"hosts\": [\"127.0.0.1\"]}]}",
      "policy.yaml:3: secrets[0].hosts[0]: a secret binds to host names, not addresses" },

    /* secrets: errors */
    { "version: 1\nsecrets: {}\n",
      "policy.yaml:2: secrets: expected a list of secrets, got a mapping" },
    { "version: 1\nsecrets:\n  - GH_TOKEN\n",
      "policy.yaml:3: secrets[0]: expected a mapping of name, from, hosts, ttl, got a single "
      "value" },
    { "version: 1\nsecrets:\n  -\n",
      "policy.yaml:2: secrets[0]: expected a mapping of name, from, hosts, ttl, got null" },
    { "version: 1\nsecrets:\n  - name: 1X\n    from: env:GH_TOKEN\n    hosts: [a.test]\n",
      "policy.yaml:3: secrets[0].name: \"1X\" is not a variable name (expected "
      "[A-Za-z_][A-Za-z0-9_]*)" },
    { "version: 1\nsecrets:\n  - name:\n    from: env:GH_TOKEN\n",
      "policy.yaml:3: secrets[0].name: expected a variable name, got null" },
    { "version: 1\nsecrets:\n" ONE_SECRET("A") ONE_SECRET("B") ONE_SECRET("A"),
      "policy.yaml:5: secrets[2].name: \"A\" is already a secret" },
    { "version: 1\nenv:\n  pass: [A]\nsecrets:\n" ONE_SECRET("A"),
      "policy.yaml:5: secrets[0].name: \"A\" is also in env.pass" },
    { "version: 1\nenv:\n  set: {A: x}\nsecrets:\n" ONE_SECRET("A"),
      "policy.yaml:5: secrets[0].name: \"A\" is also in env.set" },
    { "version: 1\nsecrets:\n" ONE_SECRET("A") "env:\n  pass: [B, A]\n",
      "policy.yaml:5: env.pass[1]: \"A\" is also in secrets" },
    { "version: 1\nsecrets:\n" ONE_SECRET("A") "env:\n  set:\n    A: x\n",
      "policy.yaml:6: env.set.A: \"A\" is also in secrets" },
    { "version: 1\nsecrets:\n  - name: A\n    from: env:CORDON_TEST_UNSET\n    hosts: [a.test]\n",
      "policy.yaml:4: secrets[0].from: environment variable \"CORDON_TEST_UNSET\" is not set" },
    { "version: 1\nsecrets:\n  - name: A\n    from: env:CORDON_TEST_EMPTY\n    hosts: [a.test]\n",
      "policy.yaml:4: secrets[0].from: environment variable \"CORDON_TEST_EMPTY\" is empty" },
    { "version: 1\nsecrets:\n  - name: A\n    from: env:GH-TOKEN\n",
      "policy.yaml:4: secrets[0].from: \"GH-TOKEN\" is not a variable name (expected "
      "[A-Za-z_][A-Za-z0-9_]*)" },
    { "version: 1\nsecrets:\n  - name: A\n    from: ghp_notareference\n",
      "policy.yaml:4: secrets[0].from: " REFERENCE },
    { "version: 1\nsecrets:\n  - name: A\n    from: [env:GH_TOKEN]\n",
      "policy.yaml:4: secrets[0].from: expected env:VAR or file:PATH, got a list" },
    { "version: 1\nsecrets:\n  - name: A\n    from: file:token.txt\n",
      "policy.yaml:4: secrets[0].from: host path \"token.txt\" is not absolute" },
    { "version: 1\nsecrets:\n  - name: A\n    from: file:@T/nope.txt\n",
      "policy.yaml:4: secrets[0].from: \"@T/nope.txt\" does not exist" },
    { "version: 1\nsecrets:\n  - name: A\n    from: file:@T/ws\n",
      "policy.yaml:4: secrets[0].from: \"@T/ws\" is not a regular file" },
    { "version: 1\nsecrets:\n  - name: A\n    from: \"file:\"\n",
      "policy.yaml:4: secrets[0].from: expected a path, got \"\"" },
    { "version: 1\nsecrets:\n  - name: A\n    from: env:GH_TOKEN\n    hosts: []\n",
      "policy.yaml:5: secrets[0].hosts: a secret needs at least one host" },
    { "version: 1\nsecrets:\n  - name: A\n    from: env:GH_TOKEN\n    hosts:\n",
      "policy.yaml:5: secrets[0].hosts: expected a list of host names, got null" },
    { "version: 1\nsecrets:\n  - name: A\n    from: env:GH_TOKEN\n    hosts: a.test\n",
      "policy.yaml:5: secrets[0].hosts: expected a list of host names, got a single value" },
    { "version: 1\nsecrets:\n  - name: A\n    from: env:GH_TOKEN\n    hosts: [a.test, 10.0.0.1]\n",
      "policy.yaml:5: secrets[0].hosts[1]: a secret binds to host names, not addresses" },
    { "version: 1\nsecrets:\n  - name: A\n    from: env:GH_TOKEN\n    hosts:\n      - a.test\n"
      "      - 10.0.0.0/8\n",
      "policy.yaml:7: secrets[0].hosts[1]: a secret binds to host names, not addresses" },
    { "version: 1\nsecrets:\n  - name: A\n    from: env:GH_TOKEN\n    hosts: [\"[::1]:443\"]\n",
      "policy.yaml:5: secrets[0].hosts[0]: a secret binds to host names, not addresses" },
    { "version: 1\nsecrets:\n  - name: A\n    from: env:GH_TOKEN\n    hosts: [\"a.test:0\"]\n",
      "policy.yaml:5: secrets[0].hosts[0]: bad port in \"a.test:0\" (expected 1 to 65535)" },
    { "version: 1\nsecrets:\n  - name: A\n    from: env:GH_TOKEN\n    hosts: [\"\"]\n",
      "policy.yaml:5: secrets[0].hosts[0]: expected HOST[:PORT], got \"\"" },
    { "version: 1\nsecrets:\n  - name: A\n    from: env:GH_TOKEN\n    hosts: [[a.test]]\n",
      "policy.yaml:5: secrets[0].hosts[0]: expected a host name, got a list" },
    { "version: 1\nsecrets:\n  - name: A\n    from: env:GH_TOKEN\n    hosts: [a.test]\n    ttl: "
      "0\n",
      "policy.yaml:6: secrets[0].ttl: must be greater than 0, got \"0\"" },
    { "version: 1\nsecrets:\n  - name: A\n    from: env:GH_TOKEN\n    hosts: [a.test]\n    ttl: "
      "soon\n",
      "policy.yaml:6: secrets[0].ttl: expected a duration like 30s, 2m or 500ms, got \"soon\"" },
    { "version: 1\nsecrets:\n  - name: A\n    from: env:GH_TOKEN\n    hosts: [a.test]\n    value: "
      "x\n",
      "policy.yaml:6: secrets[0].value: " KNOWN_SECRET },
    { "version: 1\nsecrets:\n  - from: env:GH_TOKEN\n    hosts: [a.test]\n",
      "policy.yaml:3: secrets[0]: name: missing" },
    { "version: 1\nsecrets:\n  - {name: A, hosts: [a.test]}\n",
      "policy.yaml:3: secrets[0]: from: missing" },
    { "version: 1\nsecrets:\n  - {name: A, from: env:GH_TOKEN}\n",
      "policy.yaml:3: secrets[0]: hosts: missing" },
    { "version: 1\nnetwork:\n  mode: none\nsecrets:\n" ONE_SECRET("A"),
      "policy.yaml: secrets: need network mode gateway (mode is none)" },

    /* audit */
    { "version: 1\n", NULL, "audit", AUDIT_DEFAULT },
    { "version: 1\naudit: {}\n", NULL, "audit", AUDIT_DEFAULT },
    { "version: 1\naudit:\n  file: @T/audit.jsonl\n  sign_key: @T/file.txt\n"
      "  checkpoint_every: 100\n  fsync: always\n",
      NULL, "audit", AUDIT("\"@T/audit.jsonl\"", "\"@T/file.txt\"", 100, "always") },
    { "version: 1\naudit:\n  sign_key: @T/file.txt\n",
      "policy.yaml: audit: sign_key is set but file is not" },
    { "version: 1\naudit:\n  file: @T/a.jsonl\n  witness: @T/data/w.jsonl\n", NULL, "audit",
      "{\"checkpoint_every\":0,\"file\":\"@T/a.jsonl\",\"fsync\":\"close\",\"sign_key\":null,"
      "\"witness\":\"@T/data/w.jsonl\"}" },
    { "version: 1\naudit:\n  witness: @T/w.jsonl\n",
      "policy.yaml: audit: witness is set but file is not" },
    { "version: 1\naudit:\n  file: @T/a.jsonl\n  witness: @T/data/../a.jsonl\n",
      "policy.yaml: audit: witness \"@T/a.jsonl\" is the log itself; keep it on another path, "
      "out of reach of whoever may edit the log" },
    { "version: 1\naudit:\n  file: @T/a.jsonl\n  witness: @T/link/w.jsonl\n",
      "policy.yaml: audit.witness: \"@T/link\" is a symbolic link (to \"data\") that a run could "
      "have planted; cordon never writes through one" },
    { "version: 1\naudit:\n  file: @T/a.jsonl\n  witness: @T/ws/w.jsonl\nfilesystem:\n"
      "  workspace: @T/ws\n",
      "policy.yaml: audit.witness: \"@T/ws/w.jsonl\" is inside the workspace \"@T/ws\", which "
      "the sandbox can write; keep it outside" },
    { "version: 1\naudit:\n  file: @T/a.jsonl\n  witness: @T/nope/w.jsonl\n",
      "policy.yaml:4: audit.witness: the directory of \"@T/nope/w.jsonl\" does not exist" },
    { "version: 1\naudit:\n  file: @T/a.jsonl\n  checkpoint_every: 10\n",
      "policy.yaml: audit: checkpoint_every needs sign_key (checkpoints are signed)" },
    /* A link in the log's path is refused: the log is never written through one. */
    { "version: 1\naudit:\n  file: @T/link/./a.jsonl\n  fsync: close\n",
      "policy.yaml: audit.file: \"@T/link\" is a symbolic link (to \"data\") that a run could "
      "have planted; cordon never writes through one" },
    { "version: 1\naudit:\n  file: @T/data/../data/./a.jsonl\n  fsync: close\n", NULL, "audit",
      AUDIT("\"@T/data/a.jsonl\"", "null", 0, "close") },
    { "version: 1\naudit:\n  file: @T/file.txt\n", NULL, "audit",
      AUDIT("\"@T/file.txt\"", "null", 0, "close") },
    { "version: 1\naudit:\n  file: @T/ws\n",
      "policy.yaml:3: audit.file: \"@T/ws\" is a directory" },
    { "version: 1\naudit:\n  file: @T/ws/\n",
      "policy.yaml:3: audit.file: \"@T/ws/\" names a directory, not a file" },
    { "version: 1\naudit:\n  file: @T/ws/..\n",
      "policy.yaml:3: audit.file: \"@T/ws/..\" is a directory" },
    { "version: 1\naudit:\n  file: @T/nope/a.jsonl\n",
      "policy.yaml:3: audit.file: the directory of \"@T/nope/a.jsonl\" does not exist" },
    { "version: 1\naudit:\n  file: @T/file.txt/a.jsonl\n",
      "policy.yaml:3: audit.file: \"@T/file.txt\" is not a directory" },
    { "version: 1\naudit:\n\n  file: audit.jsonl\n",
      "policy.yaml:4: audit.file: host path \"audit.jsonl\" is not absolute" },
    { "version: 1\naudit:\n  file: [a]\n",
      "policy.yaml:3: audit.file: expected a file path, got a list" },
    { "version: 1\naudit:\n  file: @T/a.jsonl\n  sign_key: @T/nope.pem\n",
      "policy.yaml:4: audit.sign_key: \"@T/nope.pem\" does not exist" },
    { "version: 1\naudit:\n  sign_key: @T/ws\n",
      "policy.yaml:3: audit.sign_key: \"@T/ws\" is not a regular file" },
    { "version: 1\naudit:\n  sign_key: key.pem\n",
      "policy.yaml:3: audit.sign_key: host path \"key.pem\" is not absolute" },
    { "version: 1\naudit:\n  checkpoint_every: -1\n",
      "policy.yaml:3: audit.checkpoint_every: expected a whole number, got \"-1\"" },
    { "version: 1\naudit:\n  checkpoint_every: 5000000000\n",
      "policy.yaml:3: audit.checkpoint_every: \"5000000000\" is too large" },
    { "version: 1\naudit:\n  fsync: sometimes\n",
      "policy.yaml:3: audit.fsync: expected one of always, close, got \"sometimes\"" },
    { "version: 1\naudit:\n  flie: /x\n",
      "policy.yaml:3: audit.flie: unknown key; known: file, sign_key, witness, checkpoint_every, "
      "fsync, export, export_endpoint" },
    /* workspace: a copy-on-write layer over a host workspace (issue 12) */
    { "version: 1\nfilesystem:\n  workspace: @T/ws\nworkspace:\n  mode: overlay\n"
      "  commit: manual\n",
      NULL, "workspace", "{\"commit\":\"manual\",\"mode\":\"overlay\"}" },
    { "version: 1\nfilesystem:\n  workspace: @T/ws\nworkspace:\n  mode: overlay\n", NULL,
      "workspace", "{\"commit\":\"on_success\",\"mode\":\"overlay\"}" },
    { "version: 1\nworkspace:\n  mode: overlay\n",
      "policy.yaml: workspace.mode: overlay needs a host workspace (filesystem.workspace or -w "
      "DIR)" },
    { "version: 1\nworkspace:\n  mode: cow\n",
      "policy.yaml:3: workspace.mode: expected one of direct, overlay, got \"cow\"" },
    { "version: 1\nworkspace:\n  commit: later\n",
      "policy.yaml:3: workspace.commit: expected one of always, on_success, manual, got "
      "\"later\"" },
    { "version: 1\nworkspace:\n  mod: overlay\n",
      "policy.yaml:3: workspace.mod: unknown key; known: mode, commit" },
    /* governance (issue 15) */
    { "version: 1\ntools:\n  allow: [a]\n  ask: [a]\n",
      "policy.yaml: tools.ask: needs decider.socket, decider.command or decider.elicit to ask" },
    { "version: 1\ntools:\n  allow: [a]\n  ask: [b]\ndecider:\n  socket: /tmp/d.sock\n",
      "policy.yaml: tools.ask: \"b\" is not in tools.allow" },
    { "version: 1\nbreak_glass:\n  may_relax: [audit.file]\n  max_duration: 1h\n",
      "policy.yaml:3: break_glass.may_relax[0]: \"audit.file\" cannot be relaxed by break-glass" },
    { "version: 1\nbreak_glass:\n  may_relax: [limits.mem]\n  max_duration: 1h\n",
      "policy.yaml:3: break_glass.may_relax[0]: \"limits.mem\" is not a policy key" },
    { "version: 1\nbreak_glass:\n  may_relax: [limits]\n",
      "policy.yaml: break_glass: needs max_duration" },
    { "version: 1\naudit:\n  export: syslog\n",
      "policy.yaml: audit.export: expected otlp, got \"syslog\"" },
    { "version: 1\naudit:\n  export: otlp\n",
      "policy.yaml: audit.export: otlp needs audit.export_endpoint" },
    { "version: 1\naudit: [/x]\n", "policy.yaml:2: audit: expected a mapping, got a list" },

    /* limits */
    { "version: 1\n", NULL, "limits", LIMITS_DEFAULT("") },
    { "version: 1\nlimits:\n", NULL, "limits", LIMITS_DEFAULT("") },
    { "version: 1\nlimits:\n  wall: 2m\n  cpu: 1500ms\n  memory: 512M\n  pids: 128\n"
      "  output: 1M\n  file_size: 64K\n  open_files: 256\n",
      NULL, "limits", LIMITS(120000, 1500, 536870912, 128, 1048576, 65536, 256, "", "") },
    { "version: 1\nlimits:\n  memory: unlimited\n  open_files: unlimited\n", NULL, "limits",
      LIMITS(600000, 600000, 0, 256, 16777216, 1073741824, 0, "",
             "\"wall\",\"cpu\",\"pids\",\"output\",\"file_size\"") },
    /* A written 0 could mean "none allowed" or "no limit": refused, with the word to use. */
    { "version: 1\nlimits:\n  memory: 0\n",
      "policy.yaml:3: limits.memory: 0 is not a limit; write unlimited for none" },
    { "version: 1\nlimits:\n  best_effort: true\n", NULL, "limits", LIMITS_DEFAULT(ALL_LIMITS) },
    { "version: 1\nlimits:\n  best_effort: false\n", NULL, "limits", LIMITS_DEFAULT("") },
    { "version: 1\nlimits:\n  best_effort: [pids, memory]\n", NULL, "limits",
      LIMITS_DEFAULT("\"memory\",\"pids\"") },
    /* A value written, even the default's own, is no longer a default. */
    { "version: 1\nlimits:\n  pids: 256\n  wall: 10m\n", NULL, "limits",
      LIMITS(600000, 600000, 1073741824, 256, 16777216, 1073741824, 1024, "",
             "\"cpu\",\"memory\",\"output\",\"file_size\",\"open_files\"") },
    /* "unlimited" is 0, for every limit, and written. */
    { "version: 1\nlimits:\n  wall: unlimited\n  cpu: unlimited\n  memory: unlimited\n"
      "  pids: unlimited\n  output: unlimited\n  file_size: unlimited\n"
      "  open_files: unlimited\n",
      NULL, "limits", LIMITS(0, 0, 0, 0, 0, 0, 0, "", "") },
    { "version: 1\nlimits:\n  pids: 0\n",
      "policy.yaml:3: limits.pids: 0 is not a limit; write unlimited for none" },
    { "version: 1\nlimits:\n  memory: Unlimited\n",
      "policy.yaml:3: limits.memory: expected a size like 256M, got \"Unlimited\"" },
    { "version: 1\nlimits:\n  best_effort: [memory, disk]\n",
      "policy.yaml:3: limits.best_effort[1]: expected one of wall, cpu, memory, pids, output, "
      "file_size, open_files, got \"disk\"" },
    { "version: 1\nlimits:\n  best_effort: memory\n",
      "policy.yaml:3: limits.best_effort: expected a list of limit names, or true, got "
      "\"memory\"" },
    { "version: 1\nlimits:\n  memory: lots\n",
      "policy.yaml:3: limits.memory: expected a size like 256M, got \"lots\"" },
    { "version: 1\nlimits:\n  memory: -1G\n",
      "policy.yaml:3: limits.memory: expected a size like 256M, got \"-1G\"" },
    { "version: 1\nlimits:\n  memory: [1G]\n",
      "policy.yaml:3: limits.memory: expected a size like 256M, got a list" },
    { "version: 1\nlimits:\n\n  wall: soon\n",
      "policy.yaml:4: limits.wall: expected a duration like 30s, 2m or 500ms, got \"soon\"" },
    /* the value's control bytes reach the message escaped, not raw */
    { "version: 1\nlimits:\n  wall: \"20m\\x16\\e[2J\"\n",
      "policy.yaml:3: limits.wall: expected a duration like 30s, 2m or 500ms, got "
      "\"20m\\x16\\x1b[2J\"" },
    { "version: 1\nlimits:\n  pids: -5\n",
      "policy.yaml:3: limits.pids: expected a whole number, got \"-5\"" },
    { "version: 1\nlimits:\n  pids: 1.5\n",
      "policy.yaml:3: limits.pids: expected a whole number, got \"1.5\"" },
    { "version: 1\nlimits:\n  memory: 9000000T\n",
      "policy.yaml:3: limits.memory: \"9000000T\" is too large" },
    /* beyond what the kernel holds: refused as read, not as a setup error at the run */
    { "version: 1\nlimits:\n  pids: 4194305\n",
      "policy.yaml:3: limits.pids: \"4194305\" is more than the kernel can hold (at most "
      "4194304)" },
    { "version: 1\nlimits:\n  open_files: 2000000000\n",
      "policy.yaml:3: limits.open_files: \"2000000000\" is more than the kernel can hold (at "
      "most 1073741816)" },
    { "version: 1\nlimits: [1]\n", "policy.yaml:2: limits: expected a mapping, got a list" },
    { "version: 1\nlimits: 5\n", "policy.yaml:2: limits: expected a mapping, got a single value" },

    /* filesystem: sizes and workspace */
    { "version: 1\n", NULL, "filesystem", FS_DEFAULT_SIZES("", "") },
    /* filesystem.protected adds; unsafe_unprotect takes a default out, by exact name only */
    { "version: 1\nfilesystem:\n  protected: [.tool-versions, .direnv*, .git]\n"
      "  unsafe_unprotect: [.env*, .git]\n",
      NULL, "filesystem",
      FSP("null", 268435456, 67108864, "", "",
          "\".aider.conf.yml\",\".aws\",\".bash_login\",\".bash_logout\",\".bash_profile\","
          "\".bashrc\",\".claude\",\".codex\",\".config\",\".continue\",\".continuerc.json\","
          "\".cshrc\",\".cursor\",\".devcontainer\",\".devcontainer.json\",\".direnv*\","
          "\".env\",\".envrc\",\".exrc\",\".gemini\",\".gitconfig\","
          "\".githooks\",\".husky\",\".idea\",\".irbrc\",\".kube\","
          "\".lefthook\",\".lefthook-local.yml\",\".lefthook.yml\",\".login\",\".mcp.json\","
          "\".mise\",\".mise.local.toml\",\".mise.toml\",\".node-version\",\".nvim.lua\","
          "\".nvimrc\",\".nvmrc\",\".pdbrc\",\".pre-commit-config.yaml\",\".profile\","
          "\".pryrc\",\".python-version\",\".ruby-version\",\".sdkmanrc\",\".ssh\",\".tcshrc\","
          "\".tool-versions\",\".vscode\",\".zlogin\",\".zlogout\",\".zprofile\",\".zshenv\","
          "\".zshrc\",\"lefthook-local.yml\",\"lefthook.yml\",\"mise\",\"mise.local.toml\","
          "\"mise.toml\"",
          "\".env*\",\".git\"") },
    { "version: 1\nfilesystem:\n  unsafe_unprotect: [.gti]\n",
      "policy.yaml:3: filesystem.unsafe_unprotect[0]: \".gti\" is not a default protected name" },
    { "version: 1\nfilesystem:\n  unsafe_unprotect: [.env.local]\n",
      "policy.yaml:3: filesystem.unsafe_unprotect[0]: \".env.local\" is not a default "
      "protected name" },
    /* filesystem.unix_sockets: absolute host paths, normalised, each once */
    { "version: 1\nfilesystem:\n  unix_sockets: [/run//docker.sock, /run/docker.sock, /a/./b]\n",
      NULL, "filesystem", FS_SOCKS("\"/a/b\",\"/run/docker.sock\"") },
    { "version: 1\nfilesystem:\n  unix_sockets: [run/docker.sock]\n",
      "policy.yaml:3: filesystem.unix_sockets[0]: expected an absolute path, got "
      "\"run/docker.sock\"" },
    { "version: 1\nfilesystem:\n  unix_sockets: [/run/../etc/x]\n",
      "policy.yaml:3: filesystem.unix_sockets[0]: \"..\" is not allowed in \"/run/../etc/x\"" },
    { "version: 1\nfilesystem:\n  unix_sockets: [/]\n",
      "policy.yaml:3: filesystem.unix_sockets[0]: \"/\" is not a socket" },
    { "version: 1\nfilesystem:\n  unix_sockets: /run/docker.sock\n",
      "policy.yaml:3: filesystem.unix_sockets: expected a list of socket paths, got *" },
    { "version: 1\nfilesystem:\n  protected: [a/b]\n",
      "policy.yaml:3: filesystem.protected[0]: \"a/b\" is a path; expected a single file name" },
    { "version: 1\nfilesystem:\n  protected: ['*.sh']\n",
      "policy.yaml:3: filesystem.protected[0]: \"*.sh\": '*' may only end a name" },
    { "version: 1\nfilesystem:\n  protected: ['..']\n",
      "policy.yaml:3: filesystem.protected[0]: expected a file name, got \"..\"" },
    { "version: 1\nfilesystem:\n  protected: .git\n",
      "policy.yaml:3: filesystem.protected: expected a list of file names, got *" },
    { "version: 1\nfilesystem:\n  workspace_size: 1G\n  tmp_size: 16M\n", NULL, "filesystem",
      FS("null", 1073741824, 16777216, "", "") },
    { "version: 1\nfilesystem:\n  shm_size: 8M\n  tmp_inodes: 100\n  shm_inodes: unlimited\n"
      "  workspace_inodes: 0\n",
      NULL, "filesystem", FS_ALL("null", 268435456, 0, 67108864, 100, 8388608, 0, "", "") },
    { "version: 1\nfilesystem:\n  shm_size: 0\n",
      "policy.yaml:3: filesystem.shm_size: must be greater than 0, got \"0\"" },
    { "version: 1\nfilesystem:\n  tmp_size: unlimited\n",
      "policy.yaml:3: filesystem.tmp_size: expected a size like 256M, got \"unlimited\"" },
    { "version: 1\nfilesystem:\n  tmp_inodes: lots\n",
      "policy.yaml:3: filesystem.tmp_inodes: expected a whole number, got \"lots\"" },
    { "version: 1\nfilesystem:\n  tmp_size: 0\n",
      "policy.yaml:3: filesystem.tmp_size: must be greater than 0, got \"0\"" },
    { "version: 1\nfilesystem:\n  workspace_size: 0\n",
      "policy.yaml:3: filesystem.workspace_size: must be greater than 0, got \"0\"" },
    { "version: 1\nfilesystem:\n  workspace: @T/ws/\n", NULL, "filesystem",
      FS("\"@T/ws\"", 268435456, 67108864, "", "") },
    { "version: 1\nfilesystem:\n  workspace: @T/file.txt\n",
      "policy.yaml:3: filesystem.workspace: \"@T/file.txt\" is not a directory" },
    { "version: 1\nfilesystem:\n  workspace: @T/nope\n",
      "policy.yaml:3: filesystem.workspace: \"@T/nope\" does not exist" },
    { "version: 1\nfilesystem:\n  workspace: ws\n",
      "policy.yaml:3: filesystem.workspace: host path \"ws\" is not absolute" },
    { "version: 1\nfilesystem:\n  workspace: {path: /x}\n",
      "policy.yaml:3: filesystem.workspace: expected a directory path, got a mapping" },

    /* filesystem: binds */
    { "version: 1\nfilesystem:\n  read_only: [@T/data]\n", NULL, "filesystem",
      FS_DEFAULT_SIZES(BIND("@T/data", "@T/data"), "") },
    { "version: 1\nfilesystem:\n  read_write:\n    - @T/data:/data\n", NULL, "filesystem",
      FS_DEFAULT_SIZES("", BIND("@T/data", "/data")) },
    /* A link in a bind source is refused unless that bind may follow links. */
    { "version: 1\nfilesystem:\n  read_only:\n    - @T/link\n",
      "policy.yaml: filesystem.read_only: \"@T/link\" is a symbolic link (to \"data\") that a "
      "run could have planted; follow_symlinks: true on that bind allows it" },
    { "version: 1\nfilesystem:\n  read_only:\n    - {source: @T/link, follow_symlinks: true}\n",
      NULL, "filesystem",
      FS_DEFAULT_SIZES("{\"dest\":\"@T/link\",\"follow_symlinks\":true,\"source\":\"@T/data\"}",
                       "") },
    { "version: 1\nfilesystem:\n  workspace: @T/link\n",
      "policy.yaml: filesystem.workspace: \"@T/link\" is a symbolic link (to \"data\") that a "
      "run could have planted; filesystem.workspace_follow_symlinks: true allows it" },
    { "version: 1\nfilesystem:\n  read_only:\n    - {source: @T/data, follow_symlinks: maybe}\n",
      "policy.yaml:4: filesystem.read_only[0].follow_symlinks: expected true or false, got "
      "\"maybe\"" },
    { "version: 1\nfilesystem:\n  read_write: [@T/ws:/out]\n  read_only: [@T/data:/out/d]\n",
      "policy.yaml: filesystem: dest \"/out/d\" is inside the writable bind at \"/out\"; bind it "
      "elsewhere" },
    { "version: 1\nfilesystem:\n  read_only:\n    - @T//data/./:/opt//x/./y/\n", NULL, "filesystem",
      FS_DEFAULT_SIZES(BIND("@T/data", "/opt/x/y"), "") },
    { "version: 1\nfilesystem:\n  read_only:\n    - {source: @T/data, dest: /d}\n"
      "    - source: @T/file.txt\n  read_write: [@T/ws:/out]\n",
      NULL, "filesystem",
      FS_DEFAULT_SIZES(BIND("@T/data", "/d") "," BIND("@T/file.txt", "@T/file.txt"),
                       BIND("@T/ws", "/out")) },
    { "version: 1\nfilesystem:\n  read_only: [@T/data:/zz, @T/ws:/aa, @T/file.txt:/aa/b]\n", NULL,
      "filesystem",
      FS_DEFAULT_SIZES(
          BIND("@T/ws", "/aa") "," BIND("@T/file.txt", "/aa/b") "," BIND("@T/data", "/zz"), "") },
    { "version: 1\nfilesystem:\n  read_only: [@T/data:/process]\n", NULL, "filesystem",
      FS_DEFAULT_SIZES(BIND("@T/data", "/process"), "") },
    { "version: 1\nfilesystem:\n  read_only: []\n  read_write: []\n", NULL, "filesystem",
      FS_DEFAULT_SIZES("", "") },
    { "version: 1\nfilesystem:\n  read_only:\n    - @T/data\n    - @T/nope\n",
      "policy.yaml:5: filesystem.read_only[1]: \"@T/nope\" does not exist" },
    { "version: 1\nfilesystem:\n  read_only: [data]\n",
      "policy.yaml:3: filesystem.read_only[0]: host path \"data\" is not absolute" },
    { "version: 1\nfilesystem:\n  read_only: [\"@T/data:data\"]\n",
      "policy.yaml:3: filesystem.read_only[0]: dest \"data\" is not absolute" },
    { "version: 1\nfilesystem:\n  read_only: [\"@T/data:\"]\n",
      "policy.yaml:3: filesystem.read_only[0]: dest \"\" is not absolute" },
    { "version: 1\nfilesystem:\n  read_only: [@T/data:/a/../etc]\n",
      "policy.yaml:3: filesystem.read_only[0]: dest \"/a/../etc\" contains \"..\"" },
    { "version: 1\nfilesystem:\n  read_only: [@T/data:/]\n",
      "policy.yaml:3: filesystem.read_only[0]: dest \"/\" is the sandbox root, which cordon "
      "builds" },
    { "version: 1\nfilesystem:\n  read_only: [@T/data:/proc]\n",
      "policy.yaml:3: filesystem.read_only[0]: dest \"/proc\" is inside /proc, which the sandbox "
      "builds itself" },
    { "version: 1\nfilesystem:\n  read_write: [@T/data://dev/./shm]\n",
      "policy.yaml:3: filesystem.read_write[0]: dest \"/dev/shm\" is inside /dev, which the "
      "sandbox builds itself" },
    { "version: 1\nfilesystem:\n  read_write: [@T/ws:/workspace/]\n",
      "policy.yaml:3: filesystem.read_write[0]: dest \"/workspace\" is the workspace; use "
      "filesystem.workspace" },
    { "version: 1\nfilesystem:\n  read_only: [@T/data:/workspace/data]\n",
      "policy.yaml:3: filesystem.read_only[0]: dest \"/workspace/data\" is inside /workspace; bind "
      "it elsewhere" },
    { "version: 1\nfilesystem:\n  read_only: [@T/data]\n  read_write:\n    - @T/ws:@T/data\n",
      "policy.yaml:5: filesystem.read_write[0]: dest \"@T/data\" is already bound" },
    { "version: 1\nfilesystem:\n  read_only:\n    - {dest: /d}\n",
      "policy.yaml:4: filesystem.read_only[0]: source: missing" },
    { "version: 1\nfilesystem:\n  read_only:\n    - {src: /d}\n",
      "policy.yaml:4: filesystem.read_only[0].src: unknown key; known: source, dest, "
      "follow_symlinks" },
    { "version: 1\nfilesystem:\n  read_only:\n    - {source: [/d]}\n",
      "policy.yaml:4: filesystem.read_only[0].source: expected a path, got a list" },
    { "version: 1\nfilesystem:\n  read_only:\n    -\n",
      "policy.yaml:3: filesystem.read_only[0]: expected a path, got null" },
    { "version: 1\nfilesystem:\n  read_only: {a: b}\n",
      "policy.yaml:3: filesystem.read_only: expected a list of paths, got a mapping" },
    { "version: 1\nfilesystem:\n  read_only: @T/data\n",
      "policy.yaml:3: filesystem.read_only: expected a list of paths, got a single value" },

    /* env */
    { "version: 1\n", NULL, "env", "{\"pass\":[],\"set\":{}}" },
    { "version: 1\nenv:\n  pass: [PATH, HOME, PATH]\n  set:\n    LANG: C.UTF-8\n    EMPTY: \"\"\n"
      "    _n1: '42'\n",
      NULL, "env",
      "{\"pass\":[\"HOME\",\"PATH\"],\"set\":{\"EMPTY\":\"\",\"LANG\":\"C.UTF-8\",\"_n1\":\"42\"}"
      "}" },
    { "version: 1\nenv:\n  pass: [HOME, 1X]\n",
      "policy.yaml:3: env.pass[1]: \"1X\" is not a variable name (expected "
      "[A-Za-z_][A-Za-z0-9_]*)" },
    { "version: 1\nenv:\n  set:\n    A-B: x\n",
      "policy.yaml:4: env.set.A-B: \"A-B\" is not a variable name (expected "
      "[A-Za-z_][A-Za-z0-9_]*)" },
    { "version: 1\nenv:\n  set:\n    A: \"x\\0y\"\n",
      "policy.yaml:4: env.set.A: value of \"A\" contains a NUL byte" },
    { "version: 1\nenv:\n  set:\n    A:\n",
      "policy.yaml:4: env.set.A: expected a string, got null" },
    { "version: 1\nenv:\n  set:\n    A: [1]\n",
      "policy.yaml:4: env.set.A: expected a string, got a list" },
    { "version: 1\nenv:\n  pass: [HOME]\n  set: {HOME: /x}\n",
      "policy.yaml:4: env.set.HOME: \"HOME\" is also in env.pass" },
    { "version: 1\nenv:\n  set: [A=1]\n",
      "policy.yaml:3: env.set: expected a mapping of NAME: value, got a list" },
    { "version: 1\nenv:\n  pass: [\"A\\0B\"]\n",
      "policy.yaml:3: env.pass[0]: value contains a NUL byte" },

    /* syscalls */
    { "version: 1\n", NULL, "syscalls", "{\"allow\":[],\"deny\":[]}" },
    { "version: 1\nsyscalls:\n  allow: [chroot]\n  deny: [uname, getpid]\n", NULL, "syscalls",
      "{\"allow\":[\"chroot\"],\"deny\":[\"getpid\",\"uname\"]}" },
    { "version: 1\nsyscalls:\n  deny: [frobnicate]\n",
      "policy.yaml:3: syscalls.deny[0]: unknown system call \"frobnicate\"" },
    { "version: 1\nsyscalls:\n  allow:\n    - getpid\n    - ptrace\n",
      "policy.yaml:5: syscalls.allow[1]: \"ptrace\" cannot be allowed: *" },
    { "version: 1\nsyscalls:\n  allow: [chroot]\n  deny: [chroot]\n",
      "policy.yaml:4: syscalls.deny[0]: \"chroot\" is also in syscalls.allow" },
};

/* libfyaml would stop reading at the NUL: the rules after it would be lost unseen. */
static void test_nul_byte(void)
{
    static const char text[] = "version: 1\nlimits: {wall: 5s}\n\0\nlimits: {wall: 1s}\n";
    struct cordon_err err = { 0 };
    struct policy *p = policy_load_string(text, sizeof text - 1, "policy.yaml", &err);
    ok(!p && err.kind == CORDON_E_POLICY, "a NUL byte is refused as a policy error");
    is_str(err.msg,
           "policy.yaml:3: character U+0000 cannot appear in YAML or JSON text (write "
           "it escaped in a double-quoted string)",
           "a NUL byte is named with its line");
    policy_free(p);
}

static void test_load_cases(void)
{
    for (size_t i = 0; i < sizeof load_cases / sizeof load_cases[0]; i++) {
        const struct load_case *c = &load_cases[i];
        char *text = expand(c->text);
        struct cordon_err err = { 0 };
        struct policy *p = policy_load_string(text, strlen(text), "policy.yaml", &err);
        char name[96];
        snprintf(name, sizeof name, "load case %zu", i);
        if (c->err) {
            ok(!p && err.kind == CORDON_E_POLICY, "%s refused as a policy error", name);
            is_msg(err.msg, c->err, name);
        } else if (!ok(p != NULL, "%s loads", name)) {
            printf("#   error: %s\n#   text: %s\n", err.msg, text);
        } else {
            char *got = section_json(p, c->section);
            char *want = expand(c->json);
            is_str(got, want, name);
            free(got);
            free(want);
        }
        policy_free(p);
        free(text);
    }
}

struct set_case {
    const char *key, *value, *flag;
    const char *err;     /* expected message, or NULL */
    const char *section; /* on success: section JSON after the set */
    const char *json;
};

static const struct set_case set_cases[] = {
    { "limits.memory", "1G", "--memory", NULL, "limits",
      LIMITS(600000, 600000, 1073741824, 256, 16777216, 1073741824, 1024, "",
             "\"wall\",\"cpu\",\"pids\",\"output\",\"file_size\",\"open_files\"") },
    { "limits.memory", "lots", "--memory", "--memory: expected a size like 256M, got \"lots\"" },
    { "limits.memory", "lots", NULL, "limits.memory: expected a size like 256M, got \"lots\"" },
    { "limits.wall", "90s", "--timeout", NULL, "limits",
      LIMITS(90000, 600000, 1073741824, 256, 16777216, 1073741824, 1024, "",
             "\"cpu\",\"memory\",\"pids\",\"output\",\"file_size\",\"open_files\"") },
    { "limits.wall", "0.1ms", "--timeout",
      "--timeout: expected a duration like 30s, 2m or 500ms, got \"0.1ms\"" },
    { "limits.pids", "x", "--pids", "--pids: expected a whole number, got \"x\"" },
    { "limits.pids", "99999999999", "--pids",
      "--pids: \"99999999999\" is more than the kernel can hold (at most 4194304)" },
    { "limits.pids", "unlimited", "--pids", NULL, "limits",
      LIMITS(600000, 600000, 1073741824, 0, 16777216, 1073741824, 1024, "",
             "\"wall\",\"cpu\",\"memory\",\"output\",\"file_size\",\"open_files\"") },
    { "limits.memory", "0", "--memory", "--memory: 0 is not a limit; write unlimited for none" },
    { "limits.output", "0", "--output", "--output: 0 is not a limit; write unlimited for none" },
    { "limits.wall", "0s", "--timeout", "--timeout: 0 is not a limit; write unlimited for none" },
    { "limits.best_effort", "memory,pids", "--best-effort", NULL, "limits",
      LIMITS_DEFAULT("\"memory\",\"pids\"") },
    { "limits.best_effort", "all", "--best-effort", NULL, "limits", LIMITS_DEFAULT(ALL_LIMITS) },
    { "limits.best_effort", "memory,disk", "--best-effort",
      "--best-effort: expected one of wall, cpu, memory, pids, output, file_size, open_files, "
      "got \"disk\"" },
    { "isolation", "gvisor", "--level", NULL, "isolation", "\"gvisor\"" },
    { "isolation", "vm", "--level",
      "--level: expected one of process, namespace, gvisor, microvm, got \"vm\"" },
    { "filesystem.tmp_size", "0", "--tmp-size", "--tmp-size: must be greater than 0, got \"0\"" },
    { "filesystem.workspace", "@T/ws", "--workspace", NULL, "filesystem",
      FS("\"@T/ws\"", 268435456, 67108864, "", "") },
    { "filesystem.workspace", "@T/file.txt", "--workspace",
      "--workspace: \"@T/file.txt\" is not a directory" },
    { "filesystem.read_only", "@T/data:/d", "--ro", NULL, "filesystem",
      FS_DEFAULT_SIZES(BIND("@T/data", "/d"), "") },
    { "filesystem.read_write", "@T/data:/proc/x", "--rw",
      "--rw: dest \"/proc/x\" is inside /proc, which the sandbox builds itself" },
    { "env.set", "A=1=2", "--env", NULL, "env", "{\"pass\":[],\"set\":{\"A\":\"1=2\"}}" },
    { "env.set", "A", "--env", "--env: expected NAME=VALUE, got \"A\"" },
    { "env.pass", "HOME", "--env", NULL, "env", "{\"pass\":[\"HOME\"],\"set\":{}}" },
    { "syscalls.allow", "chroot", "--allow-syscall", NULL, "syscalls",
      "{\"allow\":[\"chroot\"],\"deny\":[]}" },
    { "syscalls.deny", "nope", "--deny-syscall", "--deny-syscall: unknown system call \"nope\"" },
    { "network", "x", "--net", "--net: \"network\" is a section, not a value" },
    { "network.mode", "gateway", "--net", NULL, "network",
      NET("gateway", "", "", "", "", 0, 0, 0, 0) },
    { "network.mode", "none", "--net", NULL, "network", NET_DEFAULT },
    { "network.mode", "off", "--net", "--net: expected one of none, gateway, got \"off\"" },
    { "network.allow", " API.Example.com. ", "--allow", NULL, "network",
      NET_ALLOW("\"api.example.com\"") },
    { "network.allow", "*.example.com:8443", "--allow", NULL, "network",
      NET_ALLOW("\"*.example.com:8443\"") },
    { "network.allow", "[::1]:80", "--allow", NULL, "network", NET_ALLOW("\"[::1]:80\"") },
    { "network.allow", "a.test:http", "--allow",
      "--allow: bad port in \"a.test:http\" (expected 1 to 65535)" },
    { "network.deny", "10.0.0.0/8", "--deny", NULL, "network",
      NET("none", "", "\"10.0.0.0/8\"", "", "", 0, 0, 0, 0) },
    { "network.deny", "", "--deny", "--deny: expected HOST[:PORT], got \"\"" },
    { "network.allow_private", "127.0.0.2", "--allow-private", NULL, "network",
      NET("none", "", "", "\"127.0.0.2/32\"", "", 0, 0, 0, 0) },
    { "network.allow_private", "[FD00::1]/8", "--allow-private", NULL, "network",
      NET("none", "", "", "\"fd00::/8\"", "", 0, 0, 0, 0) },
    { "network.allow_private", "nope", "--allow-private",
      "--allow-private: invalid CIDR \"nope\"" },
    { "network.resolve", "api.example.com=127.0.0.2", "--resolve", NULL, "network",
      NET("none", "", "", "", "\"api.example.com=127.0.0.2\"", 0, 0, 0, 0) },
    { "network.resolve", "api.example.com:127.0.0.2", "--resolve",
      "--resolve: expected HOST=IP, got \"api.example.com:127.0.0.2\"" },
    { "network.dns", "127.0.0.3:5353", "--dns", NULL, "network",
      "{\"allow\":[],\"allow_private\":[],\"budgets\":{\"bytes\":0,\"connections\":0,"
      "\"request_rate\":0,\"requests\":0},\"deny\":[],\"dns\":[\"127.0.0.3:5353\"],"
      "\"mode\":\"none\",\"resolve\":[],\"upstream_ca\":null}" },
    { "network.dns", "[::1]", "--dns", NULL, "network",
      "{\"allow\":[],\"allow_private\":[],\"budgets\":{\"bytes\":0,\"connections\":0,"
      "\"request_rate\":0,\"requests\":0},\"deny\":[],\"dns\":[\"[::1]:53\"],"
      "\"mode\":\"none\",\"resolve\":[],\"upstream_ca\":null}" },
    { "network.dns", "ns.example.com", "--dns",
      "--dns: expected IP[:PORT] of a nameserver, got \"ns.example.com\"" },
    { "network.budgets.bytes", "1G", NULL, NULL, "network",
      NET("none", "", "", "", "", 0, 1073741824, 0, 0) },
    { "network.budgets.requests", "0", NULL,
      "network.budgets.requests: must be greater than 0, got \"0\"" },
    { "network.budgets", "5", NULL,
      "network.budgets: \"network.budgets\" is a section, not a value" },
    { "limits", "x", "--limits", "--limits: \"limits\" is a section, not a value" },
    { "limits.disk", "1G", "--disk", "--disk: unknown policy key \"limits.disk\"" },
    { "audit.file", "@T/a.jsonl", "--audit", NULL, "audit",
      AUDIT("\"@T/a.jsonl\"", "null", 0, "close") },
    { "audit.file", "@T/ws", "--audit", "--audit: \"@T/ws\" is a directory" },
    { "audit.file", "", "--audit", "--audit: expected a path, got \"\"" },
    { "audit.file", "@T/nope/a", "--audit",
      "--audit: the directory of \"@T/nope/a\" does not exist" },
    { "audit.fsync", "always", "--audit-fsync", NULL, "audit", AUDIT("null", "null", 0, "always") },
    { "audit.checkpoint_every", "x", NULL,
      "audit.checkpoint_every: expected a whole number, got \"x\"" },
    { "audit", "x", "--audit", "--audit: \"audit\" is a section, not a value" },
    { "secrets", "GH=env:GH_TOKEN@api.github.com,uploads.github.com", "--secret", NULL, "secrets",
      "[" SECRET("GH", "env:GH_TOKEN", "\"api.github.com:443\",\"uploads.github.com:443\"",
                 0) "]" },
    { "secrets", "GH=env:GH_TOKEN@api.github.com,uploads.github.com", "--secret", NULL, "network",
      NET_ALLOW("\"api.github.com:443\",\"uploads.github.com:443\"") },
    { "secrets", "K=file:@T/a@b.txt@ *.a.test:8443 ", "--secret", NULL, "secrets",
      "[" SECRET("K", "file:@T/a@b.txt", "\"*.a.test:8443\"", 0) "]" },
    { "secrets", "GH=env:GH_TOKEN", "--secret",
      "--secret: expected NAME=env:VAR@HOST[,HOST] or NAME=file:PATH@HOST[,HOST]" },
    { "secrets", "GH@a.test", "--secret",
      "--secret: expected NAME=env:VAR@HOST[,HOST] or NAME=file:PATH@HOST[,HOST]" },
    { "secrets", "ghp_s3cr3t@a.test=x", "--secret",
      "--secret: expected NAME=env:VAR@HOST[,HOST] or NAME=file:PATH@HOST[,HOST]" },
    { "secrets", "GH=ghp_s3cr3t@a.test", "--secret", "--secret: " REFERENCE },
    { "secrets", "G-H=env:GH_TOKEN@a.test", "--secret",
      "--secret: \"G-H\" is not a variable name (expected [A-Za-z_][A-Za-z0-9_]*)" },
    { "secrets", "GH=env:CORDON_TEST_UNSET@a.test", "--secret",
      "--secret: environment variable \"CORDON_TEST_UNSET\" is not set" },
    { "secrets", "GH=env:GH_TOKEN@", "--secret", "--secret: expected HOST[:PORT], got \"\"" },
    { "secrets", "GH=env:GH_TOKEN@a.test,,b.test", "--secret",
      "--secret: expected HOST[:PORT], got \"\"" },
    { "secrets", "GH=env:GH_TOKEN@a.test,2130706433", "--secret",
      "--secret: a secret binds to host names, not addresses" },
    { "secrets", "GH=file:@T/nope@a.test", "--secret", "--secret: \"@T/nope\" does not exist" },
};

static void test_set_cases(void)
{
    for (size_t i = 0; i < sizeof set_cases / sizeof set_cases[0]; i++) {
        const struct set_case *c = &set_cases[i];
        struct cordon_err err = { 0 };
        struct policy *p = policy_new(&err);
        char *value = expand(c->value);
        int r = policy_set(p, c->key, value, c->flag, &err);
        char name[96];
        snprintf(name, sizeof name, "set %s=%s", c->key, c->value);
        if (c->err) {
            ok(r == -1 && err.kind == CORDON_E_POLICY, "%s refused as a policy error", name);
            is_msg(err.msg, c->err, name);
        } else if ((ok(r == 0, "%s accepted", name) &&
                    ok(policy_finalize(p, &err) == 0, "%s finalizes", name)) ||
                   (printf("#   %s\n", err.msg), 0)) {
            char *got = section_json(p, c->section);
            char *want = expand(c->json);
            is_str(got, want, name);
            free(got);
            free(want);
        }
        free(value);
        policy_free(p);
    }
}

/* Flags land on top of a file: same key replaces, a clash with the file refuses. */
static void test_flags_over_file(void)
{
    char *text = expand("version: 1\nfilesystem:\n  read_only: [@T/data]\n"
                        "env:\n  set: {A: file}\nlimits: {memory: 1G}\n");
    struct cordon_err err = { 0 };
    struct policy *p = policy_load_string(text, strlen(text), "p.yaml", &err);
    ok(p != NULL, "base policy loads");
    ok(policy_set(p, "limits.memory", "2G", "--memory", &err) == 0, "--memory overrides");
    ok(p->limits.memory == 2ull << 30, "memory is 2G");
    ok(policy_add_env(p, "A=flag", NULL, &err) == 0, "--env A=flag replaces the file's value");
    ok(p->n_env_set == 1 && strcmp(p->env_set[0].value, "flag") == 0, "A is \"flag\"");
    ok(policy_add_env(p, "A", NULL, &err) == -1, "--env A clashes with env.set A");
    is_str(err.msg, "--env: \"A\" is also in env.set", "clash message");
    char *spec = expand("@T/ws:@T/data");
    ok(policy_add_bind(p, spec, true, "--rw", &err) == -1, "--rw onto a bound dest refused");
    char *want = expand("--rw: dest \"@T/data\" is already bound");
    is_str(err.msg, want, "duplicate dest message");
    ok(policy_finalize(p, &err) == 0, "finalize passes");

    /* A relative host path is fine on a command line: it means the cwd. */
    char cwd[4096];
    ok(getcwd(cwd, sizeof cwd) && chdir(tmp) == 0, "chdir to the test dir");
    ok(policy_add_bind(p, "ws", false, "--ro", &err) == 0, "--ro ws (relative) accepted");
    char *ws = expand("@T/ws");
    ok(p->n_binds == 2 && strcmp(p->binds[1].dest, ws) == 0, "relative bind dest is absolute");
    ok(policy_set(p, "filesystem.workspace", "./ws", "--workspace", &err) == 0 &&
           strcmp(p->workspace, ws) == 0,
       "--workspace ./ws resolves against the cwd");
    ok(policy_set(p, "audit.file", "audit.jsonl", "--audit", &err) == 0 && p->audit.file,
       "--audit audit.jsonl (relative) accepted");
    char *log = expand("@T/audit.jsonl");
    is_str(p->audit.file, log, "--audit audit.jsonl resolves against the cwd");
    free(log);
    ok(policy_set(p, "audit.sign_key", "file.txt", "--audit-key", &err) == 0 && p->audit.sign_key,
       "a relative key path is accepted from a flag");
    ok(chdir(cwd) == 0, "chdir back");

    /* finalize also catches a struct filled by hand */
    free(p->binds[1].dest);
    p->binds[1].dest = strdup(p->binds[0].dest);
    ok(policy_finalize(p, &err) == -1, "finalize refuses duplicate dests");
    char *dup = expand("p.yaml: filesystem: dest \"@T/data\" is bound twice");
    is_str(err.msg, dup, "finalize duplicate message");
    free(p->binds[1].dest);
    p->binds[1].dest = strdup("/workspace");
    ok(policy_finalize(p, &err) == -1, "finalize refuses /workspace as a bind dest");
    is_str(err.msg,
           "p.yaml: filesystem: dest \"/workspace\" is the workspace; use "
           "filesystem.workspace",
           "finalize workspace message");

    free(dup);
    free(ws);
    free(want);
    free(spec);
    free(text);
    policy_free(p);
}

/* Network flags extend the file's lists; --allow implies the gateway. */
static void test_network_flags(void)
{
    static const char text[] = "version: 1\nnetwork:\n  allow: [b.test, a.test]\n"
                               "  deny: [x.a.test]\n  resolve: [a.test=127.0.0.2]\n";
    struct cordon_err err = { 0 };
    struct policy *p = policy_load_string(text, sizeof text - 1, "p.yaml", &err);
    ok(p != NULL && p->network.mode == POLICY_NET_GATEWAY, "a file's allow implies gateway");
    ok(policy_set(p, "network.allow", "a.test", "--allow", &err) == 0, "--allow a dup accepted");
    ok(policy_set(p, "network.allow", "C.test:8080", "--allow", &err) == 0, "--allow adds");
    ok(policy_set(p, "network.deny", "b.test", "--deny", &err) == 0, "--deny over a file allow");
    ok(policy_set(p, "network.allow_private", "127.0.0.2/32", "--allow-private", &err) == 0,
       "--allow-private adds");
    ok(policy_set(p, "network.resolve", "b.test=[::1]", "--resolve", &err) == 0, "--resolve adds");
    ok(policy_finalize(p, &err) == 0, "finalize passes");
    char *got = section_json(p, "network");
    is_str(got,
           NET("gateway", "\"a.test\",\"b.test\",\"c.test:8080\"", "\"b.test\",\"x.a.test\"",
               "\"127.0.0.2/32\"", "\"a.test=127.0.0.2\",\"b.test=[::1]\"", 0, 0, 0, 0),
           "flags extend the file's network lists");
    free(got);
    ok(p->network.n_allow == 3 && strcmp(p->network.allow[2], "c.test:8080") == 0,
       "struct holds the canonical texts, sorted");
    ok(policy_set(p, "network.mode", "none", "--net", &err) == 0, "--net none accepted");
    ok(policy_finalize(p, &err) == -1, "--net none with a flag's own --allow refused");
    is_str(err.msg, "p.yaml: network.allow: needs mode gateway (mode is none)",
           "--net none over allow message");
    policy_free(p);

    /* A caller's --net none over the file's rules alone tightens: no network, no rules. */
    p = policy_load_string(text, sizeof text - 1, "p.yaml", &err);
    ok(p && policy_set(p, "network.mode", "none", "--net", &err) == 0 &&
           policy_finalize(p, &err) == 0 && p->network.mode == POLICY_NET_NONE &&
           p->network.n_allow == 0,
       "--net none over the file's allow: no network, no rule left");
    policy_free(p);

    /* A file's explicit "mode: none" is not overridden by the implication. */
    static const char none[] = "version: 1\nnetwork:\n  mode: none\n";
    p = policy_load_string(none, sizeof none - 1, "p.yaml", &err);
    ok(p != NULL && p->network.mode == POLICY_NET_NONE, "mode none loads");
    ok(policy_set(p, "network.allow", "a.test", "--allow", &err) == 0, "--allow accepted");
    ok(policy_finalize(p, &err) == -1, "--allow over an explicit mode none refused");
    is_str(err.msg, "p.yaml: network.allow: needs mode gateway (mode is none)",
           "--allow over mode none message");
    ok(policy_set(p, "network.mode", "gateway", "--net", &err) == 0 &&
           policy_finalize(p, &err) == 0 && p->network.mode == POLICY_NET_GATEWAY,
       "--net gateway settles it");
    policy_free(p);

    /* Flags alone, in either order. */
    p = policy_new(&err);
    ok(policy_set(p, "network.allow", "a.test", "--allow", &err) == 0 &&
           policy_finalize(p, &err) == 0 && p->network.mode == POLICY_NET_GATEWAY,
       "--allow alone implies gateway");
    policy_free(p);
    p = policy_new(&err);
    ok(policy_set(p, "network.allow", "a.test", "--allow", &err) == 0 &&
           policy_set(p, "network.mode", "none", "--net", &err) == 0 &&
           policy_finalize(p, &err) == -1,
       "--allow with --net none refused");
    is_str(err.msg, "network.allow: needs mode gateway (mode is none)",
           "--allow with --net none message");
    policy_free(p);
    p = policy_new(&err);
    ok(policy_set(p, "network.deny", "a.test", "--deny", &err) == 0 &&
           policy_finalize(p, &err) == 0 && p->network.mode == POLICY_NET_NONE,
       "--deny alone does not open the gateway");
    policy_free(p);
}

/* Secrets: flags on top of a file, the implied gateway, and no value anywhere. */
static void test_secrets(void)
{
    char *text =
        expand("version: 1\nenv:\n  pass: [HOME]\nsecrets:\n"
               "  - {name: GH, from: \"env:GH_TOKEN\", hosts: [api.github.com]}\n"
               "  - {name: FILE_TOKEN, from: \"file:@T/secret.txt\", hosts: [\"*.b.test\"]}\n");
    struct cordon_err err = { 0 };
    struct policy *p = policy_load_string(text, strlen(text), "p.yaml", &err);
    if (!ok(p != NULL, "secrets policy loads"))
        printf("#   %s\n", err.msg);
    ok(p->n_secrets == 2 && strcmp(p->secrets[0].name, "FILE_TOKEN") == 0 &&
           strcmp(p->secrets[1].name, "GH") == 0,
       "secrets are sorted by name");
    ok(p->network.mode == POLICY_NET_GATEWAY && !p->network.mode_explicit,
       "secrets imply the gateway");
    ok(p->network.n_allow == 2 && strcmp(p->network.allow[0], "*.b.test:443") == 0 &&
           strcmp(p->network.allow[1], "api.github.com:443") == 0,
       "bound hosts are allowed, on 443 when no port is named");
    ok(policy_set(p, "secrets", "NPM=env:GH_TOKEN@registry.npmjs.org", "--secret", &err) == 0,
       "--secret adds to the file's secrets");
    ok(policy_set(p, "secrets", "GH=env:GH_TOKEN@evil.test", "--secret", &err) == -1,
       "--secret with a name the file has refused");
    is_str(err.msg, "--secret: \"GH\" is already a secret", "duplicate --secret message");
    ok(policy_set(p, "secrets", "HOME=env:GH_TOKEN@a.test", "--secret", &err) == -1,
       "--secret with a name in env.pass refused");
    is_str(err.msg, "--secret: \"HOME\" is also in env.pass", "--secret over env.pass message");
    ok(policy_add_env(p, "NPM=x", NULL, &err) == -1, "--env NAME=VALUE over a secret refused");
    is_str(err.msg, "--env: \"NPM\" is also in secrets", "--env over a secret message");
    ok(policy_add_env(p, "GH", NULL, &err) == -1, "--env NAME over a secret refused");
    is_str(err.msg, "--env: \"GH\" is also in secrets", "--env NAME over a secret message");
    ok(policy_finalize(p, &err) == 0 && policy_finalize(p, &err) == 0, "finalize twice passes");
    char *got = section_json(p, "network");
    is_str(got, NET_ALLOW("\"*.b.test:443\",\"api.github.com:443\",\"registry.npmjs.org:443\""),
           "the flag's host is allowed too, once");
    free(got);

    /* Only references: the value of neither source is in the policy. */
    json_t *j = policy_to_json(p);
    char *all = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    ok(all && strstr(all, "\"from\":\"env:GH_TOKEN\"") != NULL, "the JSON names the variable");
    ok(all && strstr(all, "s3cr3t-value") == NULL, "the variable's value is not in the JSON");
    ok(all && strstr(all, "s3cr3t-file-value") == NULL, "the file's content is not in the JSON");
    free(all);
    json_decref(j);

    /* --net none after the fact, and an explicit none from the start. */
    ok(policy_set(p, "network.mode", "none", "--net", &err) == 0 && policy_finalize(p, &err) == -1,
       "--net none with secrets refused");
    is_str(err.msg, "p.yaml: secrets: need network mode gateway (mode is none)",
           "--net none with secrets message");
    policy_free(p);
    p = policy_new(&err);
    ok(policy_set(p, "network.mode", "none", "--net", &err) == 0 &&
           policy_set(p, "secrets", "GH=env:GH_TOKEN@a.test", "--secret", &err) == 0 &&
           policy_finalize(p, &err) == -1,
       "--secret with --net none refused");
    is_str(err.msg, "secrets: need network mode gateway (mode is none)",
           "--secret with --net none message");
    policy_free(p);

    /* A relative file path is fine on a command line: it means the cwd. */
    p = policy_new(&err);
    char cwd[4096];
    ok(getcwd(cwd, sizeof cwd) && chdir(tmp) == 0, "chdir to the test dir");
    ok(policy_set(p, "secrets", "T=file:./secret.txt@a.test", "--secret", &err) == 0,
       "--secret file:RELATIVE accepted");
    char *want = expand("file:@T/secret.txt");
    ok(p->n_secrets == 1 && strcmp(p->secrets[0].from, want) == 0,
       "--secret file:RELATIVE resolves against the cwd");
    free(want);
    ok(chdir(cwd) == 0, "chdir back");

    /* Caps that follow the gateway's fixed-size bookkeeping. */
    char spec[300];
    memset(spec, 'N', 128);
    strcpy(spec + 128, "=env:GH_TOKEN@a.test");
    ok(policy_set(p, "secrets", spec, "--secret", &err) == -1, "a 128-character name refused");
    is_str(err.msg,
           "--secret: \"NNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNN...\" is too long "
           "(at most 127 characters)",
           "long name message");
    int added = 0;
    for (int i = 0; i < POLICY_MAX_SECRETS - 1; i++) {
        snprintf(spec, sizeof spec, "S%02d=env:GH_TOKEN@a.test", i);
        added += policy_set(p, "secrets", spec, "--secret", &err) == 0;
    }
    ok(added == POLICY_MAX_SECRETS - 1 && p->n_secrets == POLICY_MAX_SECRETS, "64 secrets fit");
    ok(policy_set(p, "secrets", "S99=env:GH_TOKEN@a.test", "--secret", &err) == -1,
       "a 65th secret refused");
    is_str(err.msg, "--secret: more than 64 secrets", "65th secret message");

    /* The loaders check each field; finalize catches a struct filled by hand. */
    ok(policy_set(p, "env.pass", "PATH", "--env", &err) == 0, "an unrelated env.pass");
    free(p->env_pass[0]);
    p->env_pass[0] = strdup("S07");
    ok(policy_finalize(p, &err) == -1, "finalize refuses a secret also in env.pass");
    is_str(err.msg, "secrets: \"S07\" is also in env.pass", "finalize clash message");
    policy_free(p);
    free(text);
}

static void test_defaults_and_json(void)
{
    struct cordon_err err = { 0 };
    struct policy *p = policy_new(&err);
    json_t *j = policy_to_json(p);
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    is_str(
        s,
        "{\"audit\":{\"checkpoint_every\":0,\"file\":null,\"fsync\":\"close\","
        "\"sign_key\":null},"
        "\"env\":{\"pass\":[],\"set\":{}},\"filesystem\":" FS_DEFAULT_SIZES(
            "", "") ",\"isolation\":\"namespace\",\"limits\":" LIMITS_DEFAULT("") ","
                                                                                  "\"network\""
                                                                                  ":" NET_DEFAULT
                                                                                  ",\"secrets\":[],"
                                                                                  "\"syscalls\":"
                                                                                  "{\"allow\":[],"
                                                                                  "\"deny\":[]},"
                                                                                  "\"tools\""
                                                                                  ":" TOOLS_ALLOW(
                                                                                      "",
                                                                                      "") ",\"versi"
                                                                                          "on\":1}",
        "defaults as JSON");
    ok(policy_finalize(p, &err) == 0, "defaults finalize");
    free(s);
    json_decref(j);
    policy_free(p);

    is_str(cordon_level_name(CORDON_LEVEL_PROCESS), "process", "level name process");
    is_str(cordon_level_name(CORDON_LEVEL_MICROVM), "microvm", "level name microvm");
    is_str(cordon_level_name((enum cordon_level)9), NULL, "level name out of range");
    is_str(policy_limit_name(POLICY_LIMIT_FILE_SIZE), "file_size", "limit name file_size");
    is_str(policy_limit_name(POLICY_LIMIT_COUNT), NULL, "limit name out of range");
}

static void digest_of(const char *text, char hex[65]);

/* The digest of "version: 1", for comparisons. */
static const char *a_default(void)
{
    static char hex[65];
    digest_of("version: 1\n", hex);
    return hex;
}

static void digest_of(const char *text, char hex[65])
{
    struct cordon_err err = { 0 };
    char *t = expand(text);
    struct policy *p = policy_load_string(t, strlen(t), "a.yaml", &err);
    if (!p) {
        printf("#   %s\n", err.msg);
        strcpy(hex, "failed");
    } else {
        policy_digest_hex(p, hex);
    }
    policy_free(p);
    free(t);
}

static void test_digest(void)
{
    char yaml[65], json[65], changed[65], reordered[65];
    digest_of("version: 1\n# a comment\nlimits:\n  memory: 256M\n  wall: 30s\n"
              "filesystem:\n  read_only: [@T/data, @T/ws:/w]\nenv:\n  pass: [HOME, PATH]\n",
              yaml);
    digest_of("{\"version\": 1, \"env\": {\"pass\": [\"PATH\", \"HOME\"]},"
              " \"filesystem\": {\"read_only\": [{\"source\": \"@T/ws\", \"dest\": \"/w\"},"
              " \"@T/data\"]},"
              " \"limits\": {\"wall\": \"30000ms\", \"memory\": 268435456}}",
              json);
    digest_of("version: 1\nlimits:\n  memory: 256M\n  wall: 31s\n"
              "filesystem:\n  read_only: [@T/data, @T/ws:/w]\nenv:\n  pass: [HOME, PATH]\n",
              changed);
    digest_of(
        "version: 1\nenv:\n  pass: [PATH, HOME]\nfilesystem:\n  read_only: [@T/ws:/w, @T/data]\n"
        "limits:\n  wall: 30s\n  memory: 256M\n",
        reordered);
    ok(strlen(yaml) == 64, "digest is 64 hex digits");
    is_str(json, yaml, "same policy as JSON has the same digest");
    is_str(reordered, yaml, "reordered keys and lists keep the digest");
    ok(strcmp(changed, yaml) != 0, "a changed limit changes the digest");
    char audited[65];
    digest_of("version: 1\nlimits:\n  memory: 256M\n  wall: 30s\n"
              "filesystem:\n  read_only: [@T/data, @T/ws:/w]\nenv:\n  pass: [HOME, PATH]\n"
              "audit:\n  fsync: always\n",
              audited);
    ok(strcmp(audited, yaml) != 0, "the audit section is part of the digest");
    char networked[65];
    digest_of("version: 1\nlimits:\n  memory: 256M\n  wall: 30s\n"
              "filesystem:\n  read_only: [@T/data, @T/ws:/w]\nenv:\n  pass: [HOME, PATH]\n"
              "network:\n  allow: [a.test]\n",
              networked);
    ok(strcmp(networked, yaml) != 0, "the network section is part of the digest");
    char sec[65], sec_host[65], sec_reordered[65], sec_ttl[65];
    digest_of(
        "version: 1\nsecrets:\n  - {name: A, from: \"env:GH_TOKEN\", hosts: [a.test, b.test]}\n",
        sec);
    digest_of(
        "version: 1\nsecrets:\n  - {name: A, from: \"env:GH_TOKEN\", hosts: [a.test, c.test]}\n",
        sec_host);
    digest_of("{\"version\": 1, \"secrets\": [{\"hosts\": [\"B.test\", \"a.test\"], "
              "\"from\": \"env:GH_TOKEN\", \"name\": \"A\"}]}",
              sec_reordered);
    digest_of("version: 1\nsecrets:\n  - {name: A, from: \"env:GH_TOKEN\", hosts: [a.test, b.test],"
              " ttl: 1h}\n",
              sec_ttl);
    ok(strlen(sec) == 64 && strcmp(sec, a_default()) != 0, "secrets are part of the digest");
    ok(strcmp(sec_host, sec) != 0, "a changed secret host changes the digest");
    is_str(sec_reordered, sec, "another spelling and order of a secret keeps the digest");
    ok(strcmp(sec_ttl, sec) != 0, "a secret's ttl changes the digest");

    char a[65], b[65];
    digest_of("version: 1\n", a);
    struct cordon_err err = { 0 };
    struct policy *p = policy_new(&err);
    policy_digest_hex(p, b);
    is_str(a, b, "origin is not part of the digest");
    policy_free(p);
}

static void network_digest_of(const char *text, char hex[65])
{
    struct cordon_err err = { 0 };
    struct policy *p = policy_load_string(text, strlen(text), "n.yaml", &err);
    if (!p) {
        printf("#   %s\n", err.msg);
        strcpy(hex, "failed");
    } else {
        policy_network_digest_hex(p, hex);
    }
    policy_free(p);
}

static void test_network_digest(void)
{
    char base[65], spelled[65], limits[65], budget[65], none[65];
    network_digest_of("version: 1\nnetwork:\n  allow: [a.test, \"*.b.test:8443\"]\n"
                      "  resolve: [a.test=127.0.0.2]\n",
                      base);
    network_digest_of(
        "{\"version\": 1, \"network\": {\"resolve\": [\"A.test.=127.0.0.2\"],"
        " \"mode\": \"gateway\", \"allow\": [\"*.B.test:8443\", \"a.test\", \"A.TEST\"]}}",
        spelled);
    network_digest_of("version: 1\nlimits: {memory: 1G}\nnetwork:\n"
                      "  allow: [a.test, \"*.b.test:8443\"]\n  resolve: [a.test=127.0.0.2]\n",
                      limits);
    network_digest_of("version: 1\nnetwork:\n  allow: [a.test, \"*.b.test:8443\"]\n"
                      "  resolve: [a.test=127.0.0.2]\n  budgets: {requests: 5}\n",
                      budget);
    network_digest_of("version: 1\n", none);
    ok(strlen(base) == 64, "network digest is 64 hex digits");
    is_str(spelled, base, "another spelling and order keeps the network digest");
    is_str(limits, base, "other sections do not change the network digest");
    ok(strcmp(budget, base) != 0, "a budget changes the network digest");
    ok(strcmp(none, base) != 0, "no network differs");

    /* The digest is of the network object exactly as policy_to_json writes it. */
    struct cordon_err err = { 0 };
    struct policy *p = policy_new(&err);
    char *s = section_json(p, "network");
    unsigned char d[32];
    unsigned int len = 0;
    EVP_Digest(s, strlen(s), d, &len, EVP_sha256(), NULL);
    char want[65], got[65];
    for (int i = 0; i < 32; i++)
        snprintf(want + 2 * i, 3, "%02x", d[i]);
    policy_network_digest_hex(p, got);
    is_str(got, want, "network digest is SHA-256 of the canonical network JSON");
    is_str(got, none, "the default network digest");
    free(s);
    policy_free(p);
}

static void test_files(void)
{
    static const char *const examples[] = {
        SRCDIR "/examples/python-tool-call.yaml",
        SRCDIR "/examples/shell-build-step.yaml",
        SRCDIR "/examples/data-transform.yaml",
        SRCDIR "/examples/api-client.yaml",
    };
    for (size_t i = 0; i < sizeof examples / sizeof examples[0]; i++) {
        struct cordon_err err = { 0 };
        struct policy *p = policy_load(examples[i], &err);
        if (!ok(p != NULL, "example %s loads", strrchr(examples[i], '/') + 1))
            printf("#   %s\n", err.msg);
        policy_free(p);
    }

    struct cordon_err err = { 0 };
    char *missing = expand("@T/missing.yaml");
    ok(policy_load(missing, &err) == NULL && err.kind == CORDON_E_POLICY, "missing file refused");
    char *want = expand("cannot open '@T/missing.yaml': No such file or directory");
    is_str(err.msg, want, "missing file message");
    free(want);
    free(missing);

    /* A file is named as given, lines count from 1. */
    char *path = expand("@T/bad.json");
    FILE *f = fopen(path, "w");
    fputs("{\n  \"version\": 1,\n  \"filesystem\": {\"tmp_size\": \"lots\"}\n}\n", f);
    fclose(f);
    ok(policy_load(path, &err) == NULL, "bad JSON file refused");
    want = expand("@T/bad.json:3: filesystem.tmp_size: expected a size like 256M, got \"lots\"");
    is_str(err.msg, want, "bad JSON file message");
    free(want);
    free(path);
}

static void make_tree(void)
{
    char tmpl[] = "/tmp/cordon-policy-XXXXXX";
    if (!mkdtemp(tmpl) || !realpath(tmpl, tmp))
        abort();
    char path[4200];
    snprintf(path, sizeof path, "%s/ws", tmp);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/data", tmp);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/file.txt", tmp);
    FILE *f = fopen(path, "w");
    fclose(f);
    snprintf(path, sizeof path, "%s/link", tmp);
    if (symlink("data", path) < 0)
        abort();
    snprintf(path, sizeof path, "%s/a@b.txt", tmp);
    f = fopen(path, "w");
    fclose(f);
    snprintf(path, sizeof path, "%s/secret.txt", tmp);
    f = fopen(path, "w");
    fputs("s3cr3t-file-value\n", f);
    fclose(f);
}

static void remove_tree(void)
{
    static const char *const names[] = { "ws",       "data",    "file.txt",  "link",
                                         "bad.json", "a@b.txt", "secret.txt" };
    char path[4200];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", tmp, names[i]);
        if (unlink(path) < 0)
            rmdir(path);
    }
    rmdir(tmp);
}

/* A derived policy (a daemon's session) records its own digest, never its base's cached one. */
static void test_derived_evidence(void)
{
    struct cordon_err err = { 0 };
    struct policy *base = policy_new(&err);
    if (!ok(base && policy_finalize(base, &err) == 0, "a base policy")) {
        policy_free(base);
        return;
    }
    char base_digest[65], digest[65];
    snprintf(base_digest, sizeof base_digest, "%s", policy_evidence(base)->policy);
    struct policy derived;
    policy_derive(base, &derived);
    derived.workspace = tmp;
    ok(policy_set(&derived, "workspace.mode", "overlay", NULL, &err) == 0, "a scalar key set");
    policy_digest_hex(&derived, digest);
    ok(strcmp(digest, base_digest) != 0, "the derived policy's digest is not the base's");
    is_str(policy_evidence(&derived)->policy, digest, "the derived policy records its own digest");
    is_str(policy_evidence(base)->policy, base_digest, "the base keeps its own");
    /* Set after its digest was computed: the record follows the change. */
    ok(policy_set(base, "limits.memory", "64M", NULL, &err) == 0, "the base changed");
    policy_digest_hex(base, digest);
    ok(strcmp(digest, base_digest) != 0, "its digest changed");
    is_str(policy_evidence(base)->policy, digest, "what it records is the changed digest");
    policy_free(base);
}

int main(void)
{
    make_tree();
    setenv("GH_TOKEN", "s3cr3t-value", 1);
    setenv("CORDON_TEST_EMPTY", "", 1);
    unsetenv("CORDON_TEST_UNSET");
    test_load_cases();
    test_nul_byte();
    test_set_cases();
    test_flags_over_file();
    test_network_flags();
    test_secrets();
    test_defaults_and_json();
    test_digest();
    test_network_digest();
    test_files();
    test_derived_evidence();
    remove_tree();
    return done_testing();
}
