/*
 * common/decider.h: the runtime decider client. A decider is a process
 * outside the sandbox, on a unix socket, that answers whether one request
 * the static policy marked `ask` may go ahead now. One connection per
 * question, newline-delimited JSON:
 *
 *   cordon  -> {"cordon_decider": 1, "id", "kind" ("tool_call" | "egress"),
 *               "key" (the tool, or HOST:PORT), "run", "deadline_ms", "question": {...}}
 *   decider -> {"id", "decision": "allow_once" | "allow_run" | "allow_session" | "deny",
 *               "reason", "decider" (its name and version)}
 *
 * A decider may instead be a command (run by /bin/sh -c for each question,
 * the question on its stdin, the answer on its stdout, killed with its
 * process group at the deadline).
 *
 * Fail closed: no socket, a refused connection, a late, malformed or
 * missing answer, an answer to another id, all deny. allow_run and
 * allow_session are remembered for KIND+KEY until decider_new_run() or
 * decider_free() respectively. Written so the egress gateway can use it:
 * no dependency above common, no event loop, a hard deadline.
 */
#pragma once
#include "common/cleanup.h"
#include "common/err.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum decider_decision {
    DECIDER_DENY,
    DECIDER_ALLOW_ONCE,
    DECIDER_ALLOW_RUN,
    DECIDER_ALLOW_SESSION,
};

/* "deny", "allow_once", ... */
const char *decider_decision_name(enum decider_decision d);

struct decider_answer {
    enum decider_decision decision;
    bool cached;       /* from an earlier allow_run / allow_session */
    bool failed;       /* no valid answer: cordon denied (a timeout, a crash...) */
    char reason[200];  /* the decider's, or why cordon denied ("timeout"...) */
    char decider[128]; /* what the decider calls itself; "" if it never said */
    pid_t pid;         /* the peer's credentials (SO_PEERCRED); 0 if never connected */
    uid_t uid;
    uint64_t elapsed_ms;
};

struct decider;

/* A client for the decider at SOCKET, or run as COMMAND (one of the two), TIMEOUT_MS per question. */
struct decider *decider_new(const char *socket, const char *command, uint64_t timeout_ms,
                            struct cordon_err *err);

/* Forget the allow_run answers: a new run begins. */
void decider_new_run(struct decider *d);

/*
 * Ask about KEY of KIND in RUN (may be NULL); QUESTION (borrowed) goes to
 * the decider as is. Always answers: every failure is a deny with a reason.
 */
void decider_ask(struct decider *d, const char *kind, const char *key, const char *run,
                 const json_t *question, struct decider_answer *a);

/* The answer and the decider's identity, for the audit log (new reference). */
json_t *decider_answer_json(const struct decider *d, const struct decider_answer *a);

void decider_free(struct decider *d);
DEFINE_CLEANUP(struct decider *, decider_free)
