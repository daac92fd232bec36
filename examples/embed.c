/* examples/embed.c: run python3 in a sandbox through libcordon and print what it said. */
#include <cordon.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    struct cordon_error err = { 0 };
    struct cordon_policy *p = argc > 1 ? cordon_policy_load(argv[1], &err) : cordon_policy_new(&err);
    struct cordon_run *run = NULL;
    struct cordon_result *res = NULL;
    int out[2];
    const char *cmd[] = { "python3", "-c", "print(1+1)", NULL };
    if (!p || pipe(out) < 0)
        return fprintf(stderr, "embed: %s\n", err.message), 1;
    struct cordon_call call = { cmd, -1, out[1], 2, -1 };
    if (cordon_prepare(p, &run, &err) < 0 || cordon_start(run, &call, &err) < 0 ||
        cordon_wait(run, &res, &err) < 0) {
        fprintf(stderr, "embed: %s\n", err.message);
        return 1;
    }
    close(out[1]);
    char said[64] = "";
    ssize_t n = read(out[0], said, sizeof said - 1);
    said[n > 0 ? n : 0] = '\0';
    printf("%s: exit %d, said %s", cordon_result_reason(res), cordon_result_exit_code(res), said);
    cordon_result_free(res);
    cordon_release(run);
    cordon_policy_free(p);
    return 0;
}
