/* embed.h — the C side of the tier-0 backend: one CPython interpreter
 * embedded in the plugin process. Every function except orq_interrupt must be
 * called from the one OS thread that called orq_init (it holds the GIL for the
 * life of the process). orq_interrupt may be called from any thread. */
#ifndef ORQ_EMBED_H
#define ORQ_EMBED_H

#include <stddef.h>

/* ORQ_SIG is the (real-time) signal the watchdog uses to stop a call: a
 * Python-level handler for it raises the timeout exception, and delivering it
 * to the interpreter thread makes blocking system calls (time.sleep, select,
 * reads) return EINTR so that the handler runs. Nothing else in the process
 * uses it. */
#define ORQ_SIG 61

/* orq_result points into Python objects owned by `keep`; release it with
 * orq_release once the Go side has copied what it needs. */
typedef struct {
	void *keep;
	const char *resp;
	ptrdiff_t resp_len;
	const char *out;
	ptrdiff_t out_len;
	int out_trunc;
	const char *err;
	ptrdiff_t err_len;
	int err_trunc;
} orq_result;

/* orq_init initialises the interpreter in isolated mode and runs program (the
 * shared runner followed by the tier-0 driver) in a fresh module namespace,
 * then hands it the rules table (JSON). On failure it returns non-zero and
 * *errmsg is a malloc'ed message the caller frees. */
int orq_init(const char *program, const char *rules, char **errmsg);

/* orq_call runs one request (JSON, without the rules table) as call `id`.
 * Returns 0 and fills r on success; non-zero with *errmsg (malloc'ed) when the
 * driver itself raised (e.g. the timeout exception landed outside the
 * runner's handlers). */
int orq_call(long id, const char *req, ptrdiff_t req_len, long max_out, orq_result *r, char **errmsg);
void orq_release(orq_result *r);

/* orq_exec_raw runs src in the runner's namespace, outside any call: the
 * tests' stand-in for code that escaped the Python layers in an earlier call.
 * Returns non-zero with *errmsg (malloc'ed) if src raised. */
int orq_exec_raw(const char *src, char **errmsg);

/* orq_interrupt asks call `id` to stop: if it is still the running call, the
 * timeout exception is raised in it at the next bytecode boundary (or when
 * its blocking system call returns EINTR). tid is the interpreter thread's
 * Linux thread id. Safe from any thread, without the GIL. Returns 1 if the
 * call was running. */
int orq_interrupt(long id, int tid);

/* orq_fired reports whether call `id` was interrupted. */
int orq_fired(long id);

#endif
