/*
 * tests/unit/test_policy_pin.c: the policy's canonical form is a contract.
 * Its digest is recorded in every audit log and signed policies name it
 * (break-glass approvals sign it), so a refactor of src/policy/ must leave
 * the effective JSON, its digests, the messages and the direction of every
 * enumerated key byte for byte as they were. The expected values below were
 * taken from the code before the policy was split by section (issue 23);
 * a change here is a change of format, never a tidy-up (the one so far:
 * .gitattributes and .gitmodules left the default protected names when git
 * came to work in a workspace, issue 27).
 *
 * The policies name only host paths every Debian machine has (/usr, /etc,
 * /tmp, /run), so the pinned texts hold no per-run directory.
 */
#include "policy/policy.h"

#include "tap.h"

#include <stdlib.h>
#include <string.h>

/* Everything a file can say, each section set away from its default. */
static const char rich[] =
    "version: 1\n"
    "isolation: [gvisor, namespace]\n"
    "microvm:\n  accel: tcg\n"
    "workspace:\n  mode: overlay\n  commit: manual\n"
    "filesystem:\n"
    "  workspace: /usr/share\n"
    "  workspace_size: 128M\n  tmp_size: 32M\n  shm_size: 16M\n"
    "  workspace_inodes: 1000\n  tmp_inodes: 2000\n  shm_inodes: 3000\n"
    "  read_only: [/usr, {source: /etc, dest: /host-etc, follow_symlinks: true}]\n"
    "  read_write: [\"/tmp:/scratch\"]\n"
    "  protected: [.secret*]\n"
    "  unsafe_unprotect: [.envrc]\n"
    "  unix_sockets: [/run/pin.sock]\n"
    "env:\n  pass: [PATH, HOME]\n  set: {LANG: C.UTF-8, EMPTY: \"\"}\n"
    "limits:\n  wall: 30s\n  cpu: 1m\n  memory: 256M\n  pids: unlimited\n  output: 1M\n"
    "  file_size: 64M\n  open_files: 64\n  best_effort: [memory, pids]\n"
    "syscalls:\n  allow: [chroot]\n  deny: [uname]\n"
    "network:\n"
    "  mode: gateway\n"
    "  allow: [api.example.com, \"*.example.org:8443\", 192.0.2.7]\n"
    "  deny: [bad.example.com]\n"
    "  ask: [maybe.example.net]\n"
    "  allow_private: [10.0.0.0/8, \"[fd00::]/8\"]\n"
    "  resolve: [api.example.com=127.0.0.2]\n"
    "  dns: [1.1.1.1, \"[2606:4700::1111]:5353\"]\n"
    "  budgets: {requests: 100, bytes: 10M, connections: 4, request_rate: 5}\n"
    "secrets:\n"
    "  - {name: PIN_TOKEN, from: \"env:PIN_TEST_TOKEN\", hosts: [api.example.com], ttl: 5m}\n"
    "tools:\n"
    "  allow: [read_file, search]\n"
    "  rules:\n"
    "    read_file:\n"
    "      path: {under: [/workspace], deny: [\"*.key\"], max_length: 4096,\n"
    "             pattern: \"^[a-z/]+$\"}\n"
    "  max_calls: 10\n  max_result_bytes: 1M\n  max_message_bytes: 64K\n  call_timeout: 30s\n"
    "  record_arguments: true\n  resources: true\n  prompts: true\n  logging: false\n"
    "  sampling: true\n  elicitation: true\n  roots: true\n"
    "  ask: [search]\n"
    "  pinned: [search=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef]\n"
    "audit:\n"
    "  file: /run/cordon-pin-audit.log\n"
    "  fsync: always\n"
    "  export: otlp\n  export_endpoint: http://127.0.0.1:4318/v1/logs\n"
    "decider:\n  socket: /run/cordon-pin-decider.sock\n  timeout: 2s\n"
    "break_glass:\n  may_relax: [limits.wall, network]\n  max_duration: 1h\n";

/* The same rules as JSON, in another order and spelling where the schema allows. */
static const char rich_json[] =
    "{\"break_glass\": {\"max_duration\": \"60m\", \"may_relax\": [\"network\", \"limits.wall\"]},"
    " \"decider\": {\"timeout\": \"2000ms\", \"socket\": \"/run/cordon-pin-decider.sock\"},"
    " \"audit\": {\"export_endpoint\": \"http://127.0.0.1:4318/v1/logs\", \"export\": \"otlp\","
    "  \"fsync\": \"always\", \"file\": \"/run/cordon-pin-audit.log\"},"
    " \"tools\": {\"pinned\": [\"search=0123456789abcdef0123456789abcdef0123456789abcdef"
    "0123456789abcdef\"], \"ask\": [\"search\"], \"roots\": true, \"elicitation\": true,"
    "  \"sampling\": true, \"logging\": false, \"prompts\": true, \"resources\": true,"
    "  \"record_arguments\": true, \"call_timeout\": \"30s\", \"max_message_bytes\": \"64K\","
    "  \"max_result_bytes\": \"1M\", \"max_calls\": 10, \"allow\": [\"search\", \"read_file\"],"
    "  \"rules\": {\"read_file\": {\"path\": {\"pattern\": \"^[a-z/]+$\", \"max_length\": 4096,"
    "   \"deny\": [\"*.key\"], \"under\": [\"/workspace\"]}}}},"
    " \"secrets\": [{\"ttl\": \"300s\", \"hosts\": [\"api.example.com\"],"
    "  \"from\": \"env:PIN_TEST_TOKEN\", \"name\": \"PIN_TOKEN\"}],"
    " \"network\": {\"budgets\": {\"request_rate\": 5, \"connections\": 4, \"bytes\": \"10M\","
    "  \"requests\": 100}, \"dns\": [\"[2606:4700::1111]:5353\", \"1.1.1.1:53\"],"
    "  \"resolve\": [\"api.example.com=127.0.0.2\"],"
    "  \"allow_private\": [\"fd00::/8\", \"10.0.0.0/8\"],"
    "  \"ask\": [\"maybe.example.net\"], \"deny\": [\"bad.example.com\"],"
    "  \"allow\": [\"192.0.2.7\", \"*.example.org:8443\", \"api.example.com\"],"
    "  \"mode\": \"gateway\"},"
    " \"syscalls\": {\"deny\": [\"uname\"], \"allow\": [\"chroot\"]},"
    " \"limits\": {\"best_effort\": [\"pids\", \"memory\"], \"open_files\": 64,"
    "  \"file_size\": \"64M\", \"output\": \"1M\", \"pids\": \"unlimited\", \"memory\": \"256M\","
    "  \"cpu\": \"60s\", \"wall\": \"30s\"},"
    " \"env\": {\"set\": {\"EMPTY\": \"\", \"LANG\": \"C.UTF-8\"}, \"pass\": [\"HOME\", \"PATH\"]},"
    " \"filesystem\": {\"unix_sockets\": [\"/run/pin.sock\"], \"unsafe_unprotect\": [\".envrc\"],"
    "  \"protected\": [\".secret*\"],"
    "  \"read_write\": [{\"source\": \"/tmp\", \"dest\": \"/scratch\"}],"
    "  \"read_only\": [{\"follow_symlinks\": true, \"dest\": \"/host-etc\", \"source\": \"/etc\"},"
    "   \"/usr\"], \"shm_inodes\": 3000, \"tmp_inodes\": 2000, \"workspace_inodes\": 1000,"
    "  \"shm_size\": \"16M\", \"tmp_size\": \"32M\", \"workspace_size\": \"128M\","
    "  \"workspace\": \"/usr/share\"},"
    " \"workspace\": {\"commit\": \"manual\", \"mode\": \"overlay\"},"
    " \"microvm\": {\"accel\": \"tcg\"}, \"isolation\": [\"gvisor\", \"namespace\"],"
    " \"version\": 1}";

/* Each enumerated key at a value other than its default, and one more. */
static const char enums_a[] =
    "version: 1\nisolation: microvm\nmicrovm: {accel: kvm}\n"
    "workspace: {mode: overlay, commit: always}\nfilesystem: {workspace: /usr}\n"
    "network: {mode: none}\naudit: {fsync: close}\n";
static const char enums_b[] =
    "version: 1\nisolation: [process]\nworkspace: {mode: direct, commit: on_success}\n"
    "network: {mode: gateway}\naudit: {fsync: always}\n";

struct pinned {
    const char *json; /* NULL: not compared (the digest covers it) */
    const char *digest, *network, *tools;
};

static const struct pinned pinned_default = {
    "{\"audit\":{\"checkpoint_every\":0,\"file\":null,\"fsync\":\"close\",\"sign_key\":null},\"e"
    "nv\":{\"pass\":[],\"set\":{}},\"filesystem\":{\"protected\":[\".aider.conf.yml\",\".aws\","
    "\".bash_login\",\".bash_logout\",\".bash_profile\",\".bashrc\",\".claude\",\".codex\",\".co"
    "nfig\",\".continue\",\".continuerc.json\",\".cshrc\",\".cursor\",\".devcontainer\",\".devco"
    "ntainer.json\",\".env\",\".env*\",\".envrc\",\".exrc\",\".gemini\",\".git\",\".gitconfig\","
    "\".githooks\",\".husky\",\".idea\",\".irbrc\",\".kube\",\".lefthook\",\".lefthook-local.yml"
    "\",\".lefthook.yml\",\".login\",\".mcp.json\",\".mise\",\".mise.local.toml\",\".mise.toml\""
    ",\".node-version\",\".nvim.lua\",\".nvimrc\",\".nvmrc\",\".pdbrc\",\".pre-commit-config.yam"
    "l\",\".profile\",\".pryrc\",\".python-version\",\".ruby-version\",\".sdkmanrc\",\".ssh\",\""
    ".tcshrc\",\".tool-versions\",\".vscode\",\".zlogin\",\".zlogout\",\".zprofile\",\".zshenv\""
    ",\".zshrc\",\"lefthook-local.yml\",\"lefthook.yml\",\"mise\",\"mise.local.toml\",\"mise.tom"
    "l\"],\"read_only\":[],\"read_write\":[],\"shm_inodes\":4096,\"shm_size\":67108864,\"tmp_ino"
    "des\":16384,\"tmp_size\":67108864,\"unix_sockets\":[],\"unsafe_unprotect\":[],\"workspace\""
    ":null,\"workspace_inodes\":65536,\"workspace_size\":268435456},\"isolation\":\"namespace\","
    "\"limits\":{\"best_effort\":[],\"cpu_ms\":600000,\"defaults\":[\"wall\",\"cpu\",\"memory\","
    "\"pids\",\"output\",\"file_size\",\"open_files\"],\"file_size\":1073741824,\"memory\":10737"
    "41824,\"open_files\":1024,\"output\":16777216,\"pids\":256,\"wall_ms\":600000},\"network\":"
    "{\"allow\":[],\"allow_private\":[],\"budgets\":{\"bytes\":0,\"connections\":0,\"request_rat"
    "e\":0,\"requests\":0},\"deny\":[],\"dns\":[],\"mode\":\"none\",\"resolve\":[],\"upstream_ca"
    "\":null},\"secrets\":[],\"syscalls\":{\"allow\":[],\"deny\":[]},\"tools\":{\"allow\":[],\"c"
    "all_timeout_ms\":300000,\"elicitation\":false,\"logging\":true,\"max_calls\":0,\"max_messag"
    "e_bytes\":8388608,\"max_result_bytes\":4194304,\"prompts\":false,\"record_arguments\":false"
    ",\"resources\":false,\"roots\":false,\"rules\":{},\"sa"
    "mpling\":false},\"version\":1}",
    "0e7caabe33f58e4d3aeeda2d3e3144812410eb3eded053f224c16d716df10c88",
    "0d39e10ea8908b7080ee472f532edefa8e53541bbf7f295f630f7a4f711fee62",
    "43b1f3bffeb7b35f4cea189414e0514538531bcedf648ef76f3013e7fae2101c"
};
static const struct pinned pinned_rich = {
    "{\"audit\":{\"checkpoint_every\":0,\"export\":\"otlp\",\"export_endpoint\":\"http://127.0.0"
    ".1:4318/v1/logs\",\"file\":\"/run/cordon-pin-audit.log\",\"fsync\":\"always\",\"sign_key\":"
    "null},\"break_glass\":{\"max_duration_ms\":3600000,\"may_relax\":[\"limits.wall\",\"network"
    "\"]},\"decider\":{\"socket\":\"/run/cordon-pin-decider.sock\",\"timeout_ms\":2000},\"env\":"
    "{\"pass\":[\"HOME\",\"PATH\"],\"set\":{\"EMPTY\":\"\",\"LANG\":\"C.UTF-8\"}},\"filesystem\""
    ":{\"protected\":[\".aider.conf.yml\",\".aws\",\".bash_login\",\".bash_logout\",\".bash_prof"
    "ile\",\".bashrc\",\".claude\",\".codex\",\".config\",\".continue\",\".continuerc.json\",\"."
    "cshrc\",\".cursor\",\".devcontainer\",\".devcontainer.json\",\".env\",\".env*\",\".exrc\","
    "\".gemini\",\".git\",\".gitconfig\",\".githooks\",\".husky\",\".idea\",\".irbrc\",\".kube\""
    ",\".lefthook\",\".lefthook-local.yml\",\".lefthook.yml\",\".login\",\".mcp.json\",\".mise\""
    ",\".mise.local.toml\",\".mise.toml\",\".node-version\",\".nvim.lua\",\".nvimrc\",\".nvmrc\""
    ",\".pdbrc\",\".pre-commit-config.yaml\",\".profile\",\".pryrc\",\".python-version\",\".ruby"
    "-version\",\".sdkmanrc\",\".secret*\",\".ssh\",\".tcshrc\",\".tool-versions\",\".vscode\","
    "\".zlogin\",\".zlogout\",\".zprofile\",\".zshenv\",\".zshrc\",\"lefthook-local.yml\",\"left"
    "hook.yml\",\"mise\",\"mise.local.toml\",\"mise.toml\"],\"read_only\":[{\"dest\":\"/host-etc"
    "\",\"follow_symlinks\":true,\"source\":\"/etc\"},{\"dest\":\"/usr\",\"source\":\"/usr\"}],"
    "\"read_write\":[{\"dest\":\"/scratch\",\"source\":\"/tmp\"}],\"shm_inodes\":3000,\"shm_size"
    "\":16777216,\"tmp_inodes\":2000,\"tmp_size\":33554432,\"unix_sockets\":[\"/run/pin.sock\"],"
    "\"unsafe_unprotect\":[\".envrc\"],\"workspace\":\"/usr/share\",\"workspace_inodes\":1000,\""
    "workspace_size\":134217728},\"isolation\":[\"gvisor\",\"namespace\"],\"limits\":{\"best_eff"
    "ort\":[\"memory\",\"pids\"],\"cpu_ms\":60000,\"defaults\":[],\"file_size\":67108864,\"memor"
    "y\":268435456,\"open_files\":64,\"output\":1048576,\"pids\":0,\"wall_ms\":30000},\"microvm"
    "\":{\"accel\":\"tcg\"},\"network\":{\"allow\":[\"*.example.org:8443\",\"192.0.2.7\",\"api.e"
    "xample.com\",\"api.example.com:443\"],\"allow_private\":[\"10.0.0.0/8\",\"fd00::/8\"],\"ask"
    "\":[\"maybe.example.net\"],\"budgets\":{\"bytes\":10485760,\"connections\":4,\"request_rate"
    "\":5,\"requests\":100},\"deny\":[\"bad.example.com\"],\"dns\":[\"1.1.1.1:53\",\"[2606:4700:"
    ":1111]:5353\"],\"mode\":\"gateway\",\"resolve\":[\"api.example.com=127.0.0.2\"],\"upstream_"
    "ca\":null},\"secrets\":[{\"from\":\"env:PIN_TEST_TOKEN\",\"hosts\":[\"api.example.com:443\""
    "],\"name\":\"PIN_TOKEN\",\"ttl_ms\":300000}],\"syscalls\":{\"allow\":[\"chroot\"],\"deny\":"
    "[\"uname\"]},\"tools\":{\"allow\":[\"read_file\",\"search\"],\"ask\":[\"search\"],\"call_ti"
    "meout_ms\":30000,\"elicitation\":true,\"logging\":false,\"max_calls\":10,\"max_message_byte"
    "s\":65536,\"max_result_bytes\":1048576,\"pinned\":[\"search=0123456789abcdef0123456789abcde"
    "f0123456789abcdef0123456789abcdef\"],\"prompts\":true,\"record_arguments\":true,\"resources"
    "\":true,\"roots\":true,\"rules\":{\"read_file\":{\"path\":{\"deny\":[\"*.key\"],\"max_lengt"
    "h\":4096,\"pattern\":\"^[a-z/]+$\",\"under\":[\"/workspace\"]}}},\"sampling\":true},\"versi"
    "on\":1,\"workspace\":{\"commit\":\"manual\",\"mode\":"
    "\"overlay\"}}",
    "4f4b3c62215fc2726254e17b4573f0ee2fe17fa710b43f56814a278cdd32e119",
    "1ee00239ff0e7b331d299108a8e15a407c638520ad3bdd01a08eeed4d3f97a53",
    "dba35a99e8d167c7fc288c9803fbb29d5648705dc5b9b14ba20b4abf8c482a9a"
};
static const struct pinned pinned_enums_a = {
    NULL, /* the digest pins it; the JSON of every key is pinned above */
    "34550504bf5f8a8038ee1d3d8fa604648437c9e71eff5cf326eef862f2f0b693",
    "0d39e10ea8908b7080ee472f532edefa8e53541bbf7f295f630f7a4f711fee62",
    "43b1f3bffeb7b35f4cea189414e0514538531bcedf648ef76f3013e7fae2101c"
};
static const struct pinned pinned_enums_b = {
    NULL, /* the digest pins it; the JSON of every key is pinned above */
    "401d02cce14095a01b8ed9330c6841250ebffcadcf704d225dec79fbb9520e4c",
    "f50b9d11a791a7c0ead828161bbb2158260c30dd70fda4b6c6110ad6d5aecc81",
    "43b1f3bffeb7b35f4cea189414e0514538531bcedf648ef76f3013e7fae2101c"
};
static const struct pinned pinned_flags = {
    "{\"audit\":{\"checkpoint_every\":0,\"file\":null,\"fsync\":\"always\",\"sign_key\":null},\""
    "env\":{\"pass\":[],\"set\":{\"A\":\"b\"}},\"filesystem\":{\"protected\":[\".aider.conf.yml"
    "\",\".aws\",\".bash_login\",\".bash_logout\",\".bash_profile\",\".bashrc\",\".claude\",\".c"
    "odex\",\".config\",\".continue\",\".continuerc.json\",\".cshrc\",\".cursor\",\".devcontaine"
    "r\",\".devcontainer.json\",\".env\",\".env*\",\".envrc\",\".exrc\",\".gemini\",\".git\",\"."
    "gitconfig\",\".githooks\",\".husky\",\".idea\",\".irbrc\",\".kube\",\".lefthook\",\".leftho"
    "ok-local.yml\",\".lefthook.yml\",\".login\",\".mcp.json\",\".mise\",\".mise.local.toml\",\""
    ".mise.toml\",\".node-version\",\".nvim.lua\",\".nvimrc\",\".nvmrc\",\".pdbrc\",\".pre-commi"
    "t-config.yaml\",\".profile\",\".pryrc\",\".python-version\",\".ruby-version\",\".sdkmanrc\""
    ",\".ssh\",\".tcshrc\",\".tool-versions\",\".vscode\",\".zlogin\",\".zlogout\",\".zprofile\""
    ",\".zshenv\",\".zshrc\",\"lefthook-local.yml\",\"lefthook.yml\",\"mise\",\"mise.local.toml"
    "\",\"mise.toml\"],\"read_only\":[{\"dest\":\"/e\",\"source\":\"/etc\"}],\"read_write\":[],"
    "\"shm_inodes\":4096,\"shm_size\":67108864,\"tmp_inodes\":16384,\"tmp_size\":67108864,\"unix"
    "_sockets\":[],\"unsafe_unprotect\":[],\"workspace\":\"/usr\",\"workspace_inodes\":65536,\"w"
    "orkspace_size\":268435456},\"isolation\":[\"namespace\",\"process\"],\"limits\":{\"best_eff"
    "ort\":[\"wall\",\"memory\"],\"cpu_ms\":600000,\"defaults\":[\"wall\",\"cpu\",\"pids\",\"out"
    "put\",\"file_size\",\"open_files\"],\"file_size\":1073741824,\"memory\":0,\"open_files\":10"
    "24,\"output\":16777216,\"pids\":256,\"wall_ms\":600000},\"microvm\":{\"accel\":\"tcg\"},\"n"
    "etwork\":{\"allow\":[\"api.example.com\"],\"allow_private\":[],\"budgets\":{\"bytes\":0,\"c"
    "onnections\":0,\"request_rate\":0,\"requests\":0},\"deny\":[],\"dns\":[],\"mode\":\"gateway"
    "\",\"resolve\":[],\"upstream_ca\":null},\"secrets\":[],\"syscalls\":{\"allow\":[],\"deny\":"
    "[]},\"tools\":{\"allow\":[],\"call_timeout_ms\":300000,\"elicitation\":false,\"logging\":tr"
    "ue,\"max_calls\":0,\"max_message_bytes\":8388608,\"max_result_bytes\":4194304,\"prompts\":f"
    "alse,\"record_arguments\":false,\"resources\":false,\"roots\":false,\"rules\":{},\"sampling"
    "\":false},\"version\":1,\"workspace\":{\"commit\":\""
    "always\",\"mode\":\"overlay\"}}",
    "9f7186d3ef9867ec26f1d534fe168668e692e1065cfdb30a969b5b7a04d54d65",
    "a6aed327ff6fb2a7792930e24740c286b0c286a503cffb062c6f74612ba92094",
    "43b1f3bffeb7b35f4cea189414e0514538531bcedf648ef76f3013e7fae2101c"
};

static const char *const file_msgs[][2] = {
    { "version: 1\nisolation: vm\n",
      "policy.yaml:2: isolation: expected one of process, namespace, gvisor, microvm, got \"vm\"" },
    { "version: 1\nisolation: [namespace, namespace]\n",
      "policy.yaml:2: isolation: \"namespace\" is listed twice" },
    { "version: 1\nisolation: [namespace, vm]\n",
      "policy.yaml:2: isolation: expected one of process, namespace, gvisor, microvm, got \"vm\"" },
    { "version: 1\nisolation: []\n",
      "policy.yaml:2: isolation: expected at least one level, got an empty list" },
    { "version: 1\nisolation: {a: b}\n",
      "policy.yaml:2: isolation: expected one of process, namespace, gvisor, microvm, or a list "
      "of them, got a mapping" },
    { "version: 1\nisolation: [[namespace]]\n",
      "policy.yaml:2: isolation[0]: expected a level name, got a list" },
    { "version: 1\nmicrovm: {accel: hvf}\n",
      "policy.yaml:2: microvm.accel: expected one of kvm, tcg, got \"hvf\"" },
    { "version: 1\nmicrovm: {accel: [kvm]}\n",
      "policy.yaml:2: microvm.accel: expected one of kvm, tcg, got a list" },
    { "version: 1\nmicrovm: {accel: {a: b}}\n",
      "policy.yaml:2: microvm.accel: expected one of kvm, tcg, got a mapping" },
    { "version: 1\nworkspace: {mode: cow}\n",
      "policy.yaml:2: workspace.mode: expected one of direct, overlay, got \"cow\"" },
    { "version: 1\nworkspace: {mode: [direct]}\n",
      "policy.yaml:2: workspace.mode: expected one of direct, overlay, got a list" },
    { "version: 1\nworkspace: {commit: later}\n",
      "policy.yaml:2: workspace.commit: expected one of always, on_success, manual, "
      "got \"later\"" },
    { "version: 1\nworkspace: {commit: {a: b}}\n",
      "policy.yaml:2: workspace.commit: expected one of always, on_success, manual, "
      "got a mapping" },
    { "version: 1\nworkspace: {mode: overlay}\n",
      "policy.yaml: workspace.mode: overlay needs a host workspace (filesystem.workspace or "
      "-w DIR)" },
    { "version: 1\nnetwork: {mode: open}\n",
      "policy.yaml:2: network.mode: expected one of none, gateway, got \"open\"" },
    { "version: 1\nnetwork: {mode: [none]}\n",
      "policy.yaml:2: network.mode: expected one of none, gateway, got a list" },
    { "version: 1\nnetwork: {mode: none, allow: [a.example]}\n",
      "policy.yaml: network.allow: needs mode gateway (mode is none)" },
    { "version: 1\naudit: {fsync: sometimes}\n",
      "policy.yaml:2: audit.fsync: expected one of always, close, got \"sometimes\"" },
    { "version: 1\naudit: {fsync: [always]}\n",
      "policy.yaml:2: audit.fsync: expected one of always, close, got a list" },
    { "version: 1\naudit: {fsync: Always}\n",
      "policy.yaml:2: audit.fsync: expected one of always, close, got \"Always\"" },
};

static const char *const flag_msgs[][4] = {
    { "isolation", "vm", "--level",
      "--level: expected one of process, namespace, gvisor, microvm, got \"vm\"" },
    { "isolation", "namespace,", "--level",
      "--level: expected one of process, namespace, gvisor, microvm, got \"\"" },
    { "isolation", "process,process", "--level", "--level: \"process\" is listed twice" },
    { "isolation", "", "--level",
      "--level: expected one of process, namespace, gvisor, microvm, got \"\"" },
    { "microvm.accel", "KVM", "--accel", "--accel: expected one of kvm, tcg, got \"KVM\"" },
    { "workspace.mode", "", "--workspace-mode",
      "--workspace-mode: expected one of direct, overlay, got \"\"" },
    { "workspace.commit", "never", NULL,
      "workspace.commit: expected one of always, on_success, manual, got \"never\"" },
    { "network.mode", "off", "--net", "--net: expected one of none, gateway, got \"off\"" },
    { "audit.fsync", "1", "--audit-fsync",
      "--audit-fsync: expected one of always, close, got \"1\"" },
};

static const char *const pinned_directions[] = {
    "isolation: process=R namespace=. gvisor=. microvm=.; "
    "microvm.accel: kvm=. tcg=R; "
    "workspace.mode: direct=. overlay=.; "
    "workspace.commit: always=R on_success=. manual=R; "
    "network.mode: none=. gateway=R; "
    "audit.fsync: always=. close=.; ",

    "isolation: process=R namespace=R gvisor=R microvm=.; "
    "microvm.accel: kvm=. tcg=R; "
    "workspace.mode: direct=R overlay=.; "
    "workspace.commit: always=. on_success=. manual=.; "
    "network.mode: none=. gateway=R; "
    "audit.fsync: always=. close=.; ",

    "isolation: process=. namespace=. gvisor=. microvm=.; "
    "microvm.accel: kvm=. tcg=R; "
    "workspace.mode: direct=. overlay=.; "
    "workspace.commit: always=R on_success=. manual=R; "
    "network.mode: none=. gateway=.; "
    "audit.fsync: always=. close=R; ",
};
static const char pinned_relax_msg[] =
    "--level microvm,process relaxes isolation of a signed policy; use break-glass "
    "(--relax isolation=microvm,process) if the policy allows it";

static char *dump(const struct policy *p)
{
    json_t *j = policy_to_json(p);
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(j);
    return s;
}

/* Loads TEXT, and compares its JSON and every digest with the pinned ones. */
static void pin(const char *name, const char *text, const struct pinned *want)
{
    struct cordon_err err = { 0 };
    struct policy *p = policy_load_string(text, strlen(text), name, &err);
    if (!ok(p != NULL, "%s loads", name)) {
        printf("#   %s\n", err.msg);
        return;
    }
    char *j = dump(p);
    const struct policy_evidence *ev = policy_evidence(p);
    if (want->json)
        is_str(j, want->json, name);
    is_str(ev->policy, want->digest, "policy digest");
    is_str(ev->network, want->network, "network digest");
    is_str(ev->tools, want->tools, "tools digest");
    is_str(ev->file, want->digest, "the file's digest is the policy's before any flag");
    free(j);
    policy_free(p);
}

/* Flags on top of "version: 1", each through policy_set() as the CLI gives them. */
static void test_flags(void)
{
    static const char *const flags[][3] = {
        { "isolation", "namespace,process", "--level" },
        { "microvm.accel", "tcg", "--accel" },
        { "filesystem.workspace", "/usr", "-w" },
        { "workspace.mode", "overlay", "--workspace-mode" },
        { "workspace.commit", "always", "--commit" },
        { "network.mode", "gateway", "--net" },
        { "audit.fsync", "always", "--audit-fsync" },
        { "network.allow", "api.example.com", "--allow" },
        { "limits.best_effort", "memory,wall", "--best-effort" },
        { "limits.memory", "unlimited", "--memory" },
        { "env.set", "A=b", "--env" },
        { "filesystem.read_only", "/etc:/e", "--ro" },
    };
    struct cordon_err err = { 0 };
    struct policy *p = policy_load_string("version: 1\n", 11, "flags.yaml", &err);
    bool all = p != NULL;
    for (size_t i = 0; all && i < sizeof flags / sizeof flags[0]; i++)
        if (policy_set(p, flags[i][0], flags[i][1], flags[i][2], &err) < 0) {
            printf("#   %s\n", err.msg);
            all = false;
        }
    ok(all && policy_finalize(p, &err) == 0, "flags apply: %s", err.msg);
    if (!all) {
        policy_free(p);
        return;
    }
    char *j = dump(p);
    const struct policy_evidence *ev = policy_evidence(p);
    is_str(j, pinned_flags.json, "flags");
    is_str(ev->policy, pinned_flags.digest, "flags: policy digest");
    is_str(ev->network, pinned_flags.network, "flags: network digest");
    is_str(ev->tools, pinned_flags.tools, "flags: tools digest");
    is_str(ev->file, pinned_default.digest, "flags: the file's digest is version 1's");
    free(j);
    policy_free(p);
}

/* The messages of every enumerated key, from a file and from a flag. */
static void test_messages(void)
{
    struct cordon_err err = { 0 };
    for (size_t i = 0; i < sizeof file_msgs / sizeof file_msgs[0]; i++) {
        const char *t = file_msgs[i][0];
        struct policy *p = policy_load_string(t, strlen(t), "policy.yaml", &err);
        ok(p == NULL, "refused: %s", tap_show(t));
        is_str(err.msg, file_msgs[i][1], tap_show(t));
        policy_free(p);
    }
    for (size_t i = 0; i < sizeof flag_msgs / sizeof flag_msgs[0]; i++) {
        struct policy *p = policy_new(&err);
        const char *f = flag_msgs[i][2] ? flag_msgs[i][2] : flag_msgs[i][0];
        ok(policy_set(p, flag_msgs[i][0], flag_msgs[i][1], flag_msgs[i][2], &err) < 0,
           "refused: %s %s", f, flag_msgs[i][1]);
        is_str(err.msg, flag_msgs[i][3], f);
        policy_free(p);
    }
}

/*
 * Which values of an enumerated key relax a signed policy that holds BASE:
 * one line per key, "name=R" where the value relaxes, "name=." where not.
 */
static void test_directions(void)
{
    static const char *const keys[][5] = {
        { "isolation", "process", "namespace", "gvisor", "microvm" },
        { "microvm.accel", "kvm", "tcg", NULL, NULL },
        { "workspace.mode", "direct", "overlay", NULL, NULL },
        { "workspace.commit", "always", "on_success", "manual", NULL },
        { "network.mode", "none", "gateway", NULL, NULL },
        { "audit.fsync", "always", "close", NULL, NULL },
    };
    const char *bases[] = { "version: 1\n", enums_a, enums_b };
    struct cordon_err err = { 0 };
    for (size_t b = 0; b < sizeof bases / sizeof bases[0]; b++) {
        struct policy *p = policy_load_string(bases[b], strlen(bases[b]), "base.yaml", &err);
        if (!ok(p != NULL, "base %zu loads: %s", b, err.msg))
            continue;
        policy_narrow_only(p, POLICY_NARROW_SIGNED);
        char line[512] = "";
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            strcat(line, keys[k][0]);
            strcat(line, ":");
            for (size_t v = 1; v < 5 && keys[k][v]; v++) {
                int r = policy_check_tighten(p, keys[k][0], keys[k][v], NULL, &err);
                strcat(line, " ");
                strcat(line, keys[k][v]);
                strcat(line, r < 0 ? "=R" : "=.");
            }
            strcat(line, "; ");
        }
        is_str(line, pinned_directions[b], "directions of the enumerated keys");
        policy_free(p);
    }
    /* And the message a relaxing value gets. */
    struct policy *p = policy_load_string(enums_a, strlen(enums_a), "base.yaml", &err);
    policy_narrow_only(p, POLICY_NARROW_SIGNED);
    ok(policy_set(p, "isolation", "microvm,process", "--level", &err) < 0,
       "a weaker fallback relaxes");
    is_str(err.msg, pinned_relax_msg, "the relaxing message");
    policy_free(p);
}

int main(void)
{
    setenv("PIN_TEST_TOKEN", "not-a-real-token", 1);
    pin("default.yaml", "version: 1\n", &pinned_default);
    pin("rich.yaml", rich, &pinned_rich);
    pin("rich.json", rich_json, &pinned_rich);
    pin("enums_a.yaml", enums_a, &pinned_enums_a);
    pin("enums_b.yaml", enums_b, &pinned_enums_b);
    test_flags();
    test_messages();
    test_directions();
    return done_testing();
}
