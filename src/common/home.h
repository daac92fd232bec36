/*
 * common/home.h: the command's private HOME, made by each level before the
 * command runs (the namespace level's command, the process level's
 * supervisor, gVisor's init and the microvm guest agent, which link this
 * file too). Allocates nothing: usable in a child before exec.
 */
#pragma once

/*
 * Make HOME (0700) and its .gitconfig, unless there: safe.directory "*".
 * Every bind and the workspace are another uid's to git (the host's files,
 * seen by the sandbox user), and git before 2.46 matches safe.directory
 * only as a whole path or "*", while a bind's repositories lie at any depth
 * beneath it. A file, not only GIT_CONFIG_* variables: git strips those
 * from the upload-pack it runs to clone a local path. 0, or -1 with errno.
 */
int home_make(const char *home);
