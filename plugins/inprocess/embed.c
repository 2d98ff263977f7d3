/* embed.c — see embed.h. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* This process outlives its callers: no library class takes a write while
 * armed, not even the filling of its own empty cache (audit.h). */
#define ORQ_AUDIT_NO_CACHE_FILL
#include "audit.h" /* runner/forkcore/audit.h (a symbolic link, so go rebuilds when it changes) */

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "embed.h"

/* The call now running (0: none) and the last call the watchdog asked to
 * stop. Written by the interpreter thread (cur) and the watchdog (fire). */
static long orq_cur;
static long orq_fire;

static PyObject *orq_call_fn;   /* _orq_t0_call */
/* The runner's namespace and a copy of it taken once the driver is set up:
 * every call starts from that copy, so a call that rebinds a runner name
 * (its entry point, the checker) does not reach the next call. */
static PyObject *orq_ns;
static PyObject *orq_snapshot;
static PyObject *orq_timeout;   /* the exception class raised in user code */

static char *orq_strdup_err(const char *prefix) {
	PyObject *type = NULL, *value = NULL, *tb = NULL;
	PyErr_Fetch(&type, &value, &tb);
	PyErr_NormalizeException(&type, &value, &tb);
	const char *msg = "unknown error";
	PyObject *s = NULL;
	if (value != NULL) {
		s = PyObject_Repr(value);
		if (s != NULL) {
			const char *u = PyUnicode_AsUTF8(s);
			if (u != NULL)
				msg = u;
		}
	}
	PyErr_Clear();
	size_t n = strlen(prefix) + strlen(msg) + 3;
	char *out = malloc(n);
	if (out != NULL)
		snprintf(out, n, "%s: %s", prefix, msg);
	Py_XDECREF(s);
	Py_XDECREF(type);
	Py_XDECREF(value);
	Py_XDECREF(tb);
	return out;
}

/* The Python-level handler of ORQ_SIG: raise the timeout exception in the
 * running call if the watchdog targeted it; otherwise (a late signal after
 * the call ended) do nothing. */
static PyObject *orq_on_signal(PyObject *self, PyObject *args) {
	(void)self;
	(void)args;
	long cur = __atomic_load_n(&orq_cur, __ATOMIC_SEQ_CST);
	long fire = __atomic_load_n(&orq_fire, __ATOMIC_SEQ_CST);
	if (cur != 0 && cur == fire) {
		PyErr_SetString(orq_timeout, "the sandbox execution was stopped: its time limit passed or the call was cancelled");
		return NULL;
	}
	Py_RETURN_NONE;
}

static PyMethodDef orq_on_signal_def = {
	"_orq_t0_on_signal", orq_on_signal, METH_VARARGS,
	"tier-0 watchdog signal handler"};

int orq_init(const char *program, const char *rules, char **errmsg) {
	PyStatus status;
	PyConfig config;
	PyConfig_InitIsolatedConfig(&config);
	config.site_import = 0;          /* -S */
	config.write_bytecode = 0;       /* -B */
	config.user_site_directory = 0;  /* -s (isolated already) */
	config.use_environment = 0;      /* -E (isolated already) */
	config.install_signal_handlers = 0; /* Go owns the process's signals */
	config.parse_argv = 0;
	config.buffered_stdio = 0;
	config.faulthandler = 0;
	config.tracemalloc = 0;
	/* An absolute program name makes the stdlib search start from the
	 * system interpreter's prefix instead of whatever `python3` is first on
	 * PATH (a pyenv shim, another install); when that prefix does not hold
	 * this libpython's stdlib, CPython falls back to its build prefix. */
	status = PyConfig_SetString(&config, &config.program_name, L"/usr/bin/python3");
	if (PyStatus_Exception(status))
		goto fail;
	status = Py_InitializeFromConfig(&config);
	PyConfig_Clear(&config);
	if (PyStatus_Exception(status))
		goto fail_cleared;

	PyObject *mod = PyImport_AddModule("__orqest_runner__"); /* borrowed */
	if (mod == NULL) {
		*errmsg = orq_strdup_err("create the runner module");
		return 1;
	}
	PyObject *ns = PyModule_GetDict(mod); /* borrowed */
	if (PyDict_SetItemString(ns, "__builtins__", PyEval_GetBuiltins()) < 0) {
		*errmsg = orq_strdup_err("set __builtins__");
		return 1;
	}
	orq_timeout = PyErr_NewException("orqest.SandboxTimeout", PyExc_BaseException, NULL);
	if (orq_timeout == NULL) {
		*errmsg = orq_strdup_err("create the timeout exception");
		return 1;
	}
	PyObject *handler = PyCFunction_New(&orq_on_signal_def, NULL);
	if (handler == NULL) {
		*errmsg = orq_strdup_err("create the signal handler");
		return 1;
	}
	int bad = PyDict_SetItemString(ns, "_orq_t0_on_signal", handler) < 0 ||
		PyDict_SetItemString(ns, "_orq_t0_Timeout", orq_timeout) < 0;
	Py_DECREF(handler);
	if (bad) {
		*errmsg = orq_strdup_err("install the handler");
		return 1;
	}

	PyObject *r = PyRun_String(program, Py_file_input, ns, ns);
	if (r == NULL) {
		*errmsg = orq_strdup_err("run the runner program");
		return 1;
	}
	Py_DECREF(r);

	/* The audit hook and class guard in C (audit.h), handed to the runner
	 * in its box _orq_core; only this file disarms it, after a call. */
	PyObject *box = PyDict_GetItemString(ns, "_orq_core"); /* borrowed */
	PyObject *core = orq_core_module_make();
	if (box == NULL || !PyList_Check(box) || core == NULL || PyList_Append(box, core) < 0) {
		Py_XDECREF(core);
		*errmsg = orq_strdup_err("hand the runner its audit hook");
		return 1;
	}
	Py_DECREF(core);
	PyObject *setup = PyDict_GetItemString(ns, "_orq_t0_setup"); /* borrowed */
	orq_call_fn = PyDict_GetItemString(ns, "_orq_t0_call");
	if (setup == NULL || orq_call_fn == NULL) {
		*errmsg = strdup("the runner program does not define _orq_t0_setup/_orq_t0_call");
		return 1;
	}
	Py_INCREF(orq_call_fn);
	r = PyObject_CallFunction(setup, "si", rules, ORQ_SIG);
	if (r == NULL) {
		*errmsg = orq_strdup_err("set up the driver");
		return 1;
	}
	Py_DECREF(r);
	/* _orq_t0_setup replaces _orq_t0_call with the closure that holds what
	 * the calls use: take it (and the namespace's copy) after setup. */
	Py_DECREF(orq_call_fn);
	orq_call_fn = PyDict_GetItemString(ns, "_orq_t0_call");
	if (orq_call_fn == NULL) {
		*errmsg = strdup("the driver's setup removed _orq_t0_call");
		return 1;
	}
	Py_INCREF(orq_call_fn);
	orq_ns = ns;
	Py_INCREF(orq_ns);
	orq_snapshot = PyDict_Copy(ns);
	if (orq_snapshot == NULL) {
		*errmsg = orq_strdup_err("copy the runner namespace");
		return 1;
	}
	return 0;

fail:
	PyConfig_Clear(&config);
fail_cleared: {
	const char *m = status.err_msg ? status.err_msg : "Py_InitializeFromConfig failed";
	const char *f = status.func ? status.func : "";
	size_t n = strlen(m) + strlen(f) + 4;
	*errmsg = malloc(n);
	if (*errmsg != NULL)
		snprintf(*errmsg, n, "%s%s%s", f, *f ? ": " : "", m);
	return 1;
}
}

int orq_call(long id, const char *req, ptrdiff_t req_len, long max_out, orq_result *r, char **errmsg) {
	memset(r, 0, sizeof(*r));
	PyDict_Clear(orq_ns);
	if (PyDict_Update(orq_ns, orq_snapshot) < 0) {
		*errmsg = orq_strdup_err("restore the runner namespace");
		return 1;
	}
	__atomic_store_n(&orq_cur, id, __ATOMIC_SEQ_CST);
	PyObject *res = PyObject_CallFunction(orq_call_fn, "y#l", req, (Py_ssize_t)req_len, max_out);
	if (res == NULL) {
		/* Still armed and still this call's (its timeout applies): the
		 * exception's repr and what its traceback frees (the code's
		 * generators) may run the code's methods. */
		*errmsg = orq_strdup_err("tier-0 driver");
		orq_core_disarm();
		__atomic_store_n(&orq_cur, 0, __ATOMIC_SEQ_CST);
		return 1;
	}
	orq_core_disarm();
	__atomic_store_n(&orq_cur, 0, __ATOMIC_SEQ_CST);
	PyObject *resp, *out, *err;
	int out_trunc, err_trunc;
	char *p;
	Py_ssize_t n;
	if (!PyArg_ParseTuple(res, "SSpSp", &resp, &out, &out_trunc, &err, &err_trunc)) {
		Py_DECREF(res);
		*errmsg = orq_strdup_err("tier-0 driver returned a bad tuple");
		return 1;
	}
	r->keep = res;
	PyBytes_AsStringAndSize(resp, &p, &n);
	r->resp = p;
	r->resp_len = n;
	PyBytes_AsStringAndSize(out, &p, &n);
	r->out = p;
	r->out_len = n;
	r->out_trunc = out_trunc;
	PyBytes_AsStringAndSize(err, &p, &n);
	r->err = p;
	r->err_len = n;
	r->err_trunc = err_trunc;
	return 0;
}

int orq_exec_raw(const char *src, char **errmsg) {
	PyObject *r = PyRun_String(src, Py_file_input, orq_ns, orq_ns);
	if (r == NULL) {
		*errmsg = orq_strdup_err("raw exec");
		return 1;
	}
	Py_DECREF(r);
	return 0;
}

void orq_release(orq_result *r) {
	if (r->keep != NULL) {
		Py_DECREF((PyObject *)r->keep);
		r->keep = NULL;
	}
}

int orq_interrupt(long id, int tid) {
	__atomic_store_n(&orq_fire, id, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&orq_cur, __ATOMIC_SEQ_CST) != id)
		return 0;
	/* Mark the signal as tripped (async-signal-safe, no GIL needed): the
	 * eval loop runs the handler at the next bytecode boundary. */
	PyErr_SetInterruptEx(ORQ_SIG);
	/* And deliver it to the interpreter thread so a blocking system call
	 * (sleep, select, read) returns EINTR and CPython checks signals. */
	if (tid > 0)
		syscall(SYS_tgkill, getpid(), tid, ORQ_SIG);
	return 1;
}

int orq_fired(long id) {
	return __atomic_load_n(&orq_fire, __ATOMIC_SEQ_CST) == id;
}
