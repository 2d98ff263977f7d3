// Package subprocess is the tier-1 backend: every execution runs in a Python
// process of its own under RLIMIT_AS, RLIMIT_CPU and an outer wall clock,
// sealed by whatever kernel layers the machine offers (seccomp, Landlock,
// namespaces, a separate uid), each required once found. In the fork-server
// mode (the default) a per-user zygote forks a child per call; in the spawn
// mode each call starts a fresh interpreter (internal/pyproc runs both).
//
// cmd/orqest-sandbox-plugin-subprocess serves it as a go-plugin.
package subprocess
