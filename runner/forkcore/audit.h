/*
 * audit.h: the runner's audit hook and class guard, in C.
 *
 * Included (once) by the fork-server's C loop (forkcore.c, loaded into the
 * zygote) and by tier 0's embedding code (plugins/inprocess/embed.c), so
 * there is one implementation. orq_core_module() returns a module object
 * the runner keeps in a local (never in sys.modules) with:
 *
 *   arm(config)      arm the hook with a configuration (a dict, see
 *                    orq_core_arm). One way: Python has no way to disarm
 *                    it. A process that runs one execution never disarms;
 *                    tier 0's C side (orq_core_disarm) disarms after the
 *                    call has returned to C.
 *   armed()          whether the hook is armed
 *   frames(tb)       [(line, function name)] of the traceback's frames that
 *                    run the user's code (filename "<sandbox>"), read from
 *                    the C structures: no audited attribute is read, no
 *                    Python code runs
 *   type_name(obj)   the name of obj's type, read from tp_name (no
 *                    metaclass property runs)
 *   isolate(fn)      a copy of function fn with empty globals (the
 *                    runner's guards), made without an audited event
 *   next_call(fd)    a stateful session's next call: its descriptors and
 *                    limits in place, with no audited event (the
 *                    session's hook stays armed between calls); in the
 *                    fork core only
 *
 * The armed state and the configuration live in this file's static
 * memory: no Python object refers to them.
 *
 * While armed the hook refuses the events of the configuration (as the
 * runner's Python hook did), setting an attribute of a class built before
 * it was armed (a library's: type's setattr slot, the __setattr__ wrapper
 * and every metaclass's inherited slot are replaced here), the __code__,
 * __defaults__ or __kwdefaults__ of a module's function and an object's
 * __class__
 * (whatever C code does the setting: copy's reconstruction, setattr),
 * and type.__new__ (every class creation goes
 * through PyType_Type.tp_new, replaced here) refuses, for a class built
 * while the running Python frame is the user's code ("<sandbox>"): a
 * metaclass (a base that is a subclass of type) and namespace keys that a
 * class body may not bind (dunders outside the configuration's
 * class_dunders).
 */
#ifndef ORQ_AUDIT_H
#define ORQ_AUDIT_H

#include <Python.h>
#include <frameobject.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

struct orq_strs {
    char **v;
    size_t n;
};

static struct {
    int installed;
    int armed;
    int check_open;
    char *ws; /* with a trailing '/', or NULL */
    char *eg_host; /* the egress proxy's host, or NULL: none */
    long eg_port;
    struct orq_strs exact, prefixes, roots, ws_events, class_dunders;
} orq_audit;

static newfunc orq_type_new_real;
static setattrofunc orq_type_setattro_real;
static allocfunc orq_type_alloc_real;

/* The classes built since the hook was armed (an open-addressing set of
 * pointers; a class is never freed while the execution can still name
 * it, and an address freed and reused is that of a class built since
 * then, or of no class): only their attributes may be set while armed. */
#define ORQ_MADE_FIRST 8192
static PyObject *orq_made_first[ORQ_MADE_FIRST];
static PyObject **orq_made = orq_made_first;
static size_t orq_made_cap = ORQ_MADE_FIRST;
static size_t orq_made_n;

static size_t orq_made_slot(PyObject *t, size_t cap)
{
    return (((uintptr_t)t) >> 4) * 11400714819323198485ull % cap;
}

static void orq_made_put(PyObject **set, size_t cap, PyObject *t)
{
    size_t i = orq_made_slot(t, cap);
    while (set[i] != NULL && set[i] != t)
        i = (i + 1) % cap;
    if (set[i] == NULL) {
        set[i] = t;
        orq_made_n++;
    }
}

/* Record t. At half full the set doubles (a stateful session builds classes
 * call after call); if that allocation fails, later classes' attributes
 * stay unsettable. */
static void orq_made_add(PyObject *t)
{
    if (orq_made_n >= orq_made_cap / 2) {
        size_t cap = orq_made_cap * 2;
        PyObject **set = calloc(cap, sizeof(PyObject *));
        if (set == NULL)
            return;
        PyObject **old = orq_made;
        size_t old_cap = orq_made_cap;
        orq_made_n = 0;
        for (size_t i = 0; i < old_cap; i++)
            if (old[i] != NULL)
                orq_made_put(set, cap, old[i]);
        orq_made = set;
        orq_made_cap = cap;
        if (old != orq_made_first)
            free(old);
    }
    orq_made_put(orq_made, orq_made_cap, t);
}

static int orq_made_has(PyObject *t)
{
    size_t i = orq_made_slot(t, orq_made_cap);
    while (orq_made[i] != NULL) {
        if (orq_made[i] == t)
            return 1;
        i = (i + 1) % orq_made_cap;
    }
    return 0;
}

static void orq_strs_free(struct orq_strs *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

/* s from the str items of the iterable cfg[key] (missing: empty). */
static int orq_strs_from(struct orq_strs *s, PyObject *cfg, const char *key)
{
    orq_strs_free(s);
    PyObject *x = PyDict_GetItemString(cfg, key); /* borrowed */
    if (x == NULL || x == Py_None)
        return 0;
    PyObject *seq = PySequence_Fast(x, "orq_core.arm: a list of strings");
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    s->v = calloc((size_t)n + 1, sizeof(char *));
    if (s->v == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(seq, i);
        const char *u = PyUnicode_Check(it) ? PyUnicode_AsUTF8(it) : NULL;
        if (u == NULL) {
            Py_DECREF(seq);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "orq_core.arm: a list of strings");
            return -1;
        }
        s->v[s->n] = strdup(u);
        if (s->v[s->n] == NULL) {
            Py_DECREF(seq);
            PyErr_NoMemory();
            return -1;
        }
        s->n++;
    }
    Py_DECREF(seq);
    return 0;
}

static int orq_strs_has(const struct orq_strs *s, const char *x)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i], x) == 0)
            return 1;
    return 0;
}

static int orq_strs_prefix(const struct orq_strs *s, const char *x)
{
    for (size_t i = 0; i < s->n; i++)
        if (strncmp(x, s->v[i], strlen(s->v[i])) == 0)
            return 1;
    return 0;
}

/* posixpath.normpath(p) + "/" into a new buffer (NULL: out of memory). */
static char *orq_normpath_slash(const char *p)
{
    size_t len = strlen(p);
    char *out = malloc(len + 3);
    if (out == NULL)
        return NULL;
    size_t o = 0;
    int lead = 0;
    if (p[0] == '/')
        lead = (p[1] == '/' && p[2] != '/') ? 2 : 1;
    for (int i = 0; i < lead; i++)
        out[o++] = '/';
    size_t base = o; /* out[base..o) holds the components, joined by '/' */
    const char *s = p;
    while (*s) {
        while (*s == '/')
            s++;
        const char *e = s;
        while (*e && *e != '/')
            e++;
        size_t n = (size_t)(e - s);
        if (n == 0 || (n == 1 && s[0] == '.')) {
            /* skip */
        } else if (n == 2 && s[0] == '.' && s[1] == '.') {
            /* pop the last component unless it is "..", or keep ".." in a
             * relative path; ".." at the root is dropped */
            size_t k = o;
            while (k > base && out[k - 1] != '/')
                k--;
            int last_dotdot = (o - k == 2 && out[k] == '.' && out[k + 1] == '.');
            if (o > base && !last_dotdot) {
                o = k > base ? k - 1 : base;
            } else if (lead == 0) {
                if (o > base)
                    out[o++] = '/';
                out[o++] = '.';
                out[o++] = '.';
            }
        } else {
            if (o > base)
                out[o++] = '/';
            memcpy(out + o, s, n);
            o += n;
        }
        s = e;
    }
    if (o == 0)
        out[o++] = '.';
    out[o++] = '/';
    out[o] = 0;
    return out;
}

/* A path argument as UTF-8 (surrogateescape for bytes and lone
 * surrogates) in a new reference to a bytes object, or NULL (no error set)
 * when it is not a str or bytes or holds a NUL. */
static PyObject *orq_path_bytes(PyObject *p)
{
    PyObject *b;
    if (PyUnicode_Check(p)) {
        b = PyUnicode_AsEncodedString(p, "utf-8", "surrogateescape");
    } else if (PyBytes_Check(p)) {
        b = p;
        Py_INCREF(b);
    } else {
        return NULL;
    }
    if (b == NULL) {
        PyErr_Clear();
        return NULL;
    }
    if ((size_t)PyBytes_GET_SIZE(b) != strlen(PyBytes_AS_STRING(b))) {
        Py_DECREF(b);
        return NULL;
    }
    return b;
}

/* Whether the normalised path p starts with a root (absolute only when
 * require_abs), or (roots NULL) with ws. */
static int orq_path_under(PyObject *p, const struct orq_strs *roots, const char *ws, int require_abs)
{
    PyObject *b = orq_path_bytes(p);
    if (b == NULL)
        return 0;
    const char *s = PyBytes_AS_STRING(b);
    int ok = 0;
    if (!require_abs || s[0] == '/') {
        char *n = orq_normpath_slash(s);
        if (n != NULL) {
            ok = roots != NULL ? orq_strs_prefix(roots, n) : strncmp(n, ws, strlen(ws)) == 0;
            free(n);
        }
    }
    Py_DECREF(b);
    return ok;
}

/* Whether function f belongs to a module: its globals are the dict of the
 * module sys.modules names by their __name__, or have no __name__ at all
 * (the runner's guards run in empty globals). */
static int orq_module_function(PyObject *f)
{
    PyObject *g = PyFunction_GetGlobals(f); /* borrowed */
    if (g == NULL || !PyDict_Check(g))
        return 1;
    PyObject *name = PyDict_GetItemString(g, "__name__"); /* borrowed */
    if (name == NULL || !PyUnicode_Check(name))
        return 1;
    PyObject *m = PyImport_GetModule(name);
    if (m == NULL) {
        PyErr_Clear();
        return 0;
    }
    int mine = PyModule_Check(m) && PyModule_GetDict(m) == g;
    Py_DECREF(m);
    return mine;
}

static int orq_refuse(const char *fmt, const char *what)
{
    PyErr_Format(PyExc_RuntimeError, fmt, what);
    return -1;
}

/* o is the str s. */
static int orq_str_is(PyObject *o, const char *s)
{
    if (o == NULL || !PyUnicode_Check(o))
        return 0;
    const char *u = PyUnicode_AsUTF8(o);
    if (u == NULL) {
        PyErr_Clear();
        return 0;
    }
    return strcmp(u, s) == 0;
}

/* o is the int v. */
static int orq_long_is(PyObject *o, long v)
{
    if (o == NULL || !PyLong_CheckExact(o))
        return 0;
    long x = PyLong_AsLong(o);
    if (x == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return x == v;
}

/* What the egress views' urlopen does, towards the proxy only: the
 * Python hook's egress_ok (runner/py/imports.py) is the same. */
static int orq_egress_ok(const char *event, PyObject *args, Py_ssize_t n)
{
    PyObject *a0 = n > 0 ? PyTuple_GET_ITEM(args, 0) : NULL;
    PyObject *a1 = n > 1 ? PyTuple_GET_ITEM(args, 1) : NULL;
    PyObject *a2 = n > 2 ? PyTuple_GET_ITEM(args, 2) : NULL;
    const char *h = orq_audit.eg_host;
    long port = orq_audit.eg_port;
    if (strcmp(event, "urllib.Request") == 0) {
        if (a0 == NULL || !PyUnicode_Check(a0))
            return 0;
        const char *u = PyUnicode_AsUTF8(a0);
        if (u == NULL) {
            PyErr_Clear();
            return 0;
        }
        return strncasecmp(u, "http://", 7) == 0 || strncasecmp(u, "https://", 8) == 0;
    }
    if (strcmp(event, "http.client.send") == 0)
        return 1; /* on a connection socket.connect let reach the proxy */
    if (strcmp(event, "http.client.connect") == 0)
        return orq_str_is(a1, h) && orq_long_is(a2, port);
    if (strcmp(event, "socket.getaddrinfo") == 0)
        return orq_str_is(a0, h) && orq_long_is(a1, port);
    if (strcmp(event, "socket.__new__") == 0)
        return orq_long_is(a1, AF_INET) || orq_long_is(a1, AF_INET6); /* the kernel checks the rest */
    if (strcmp(event, "socket.connect") == 0)
        return a1 != NULL && PyTuple_Check(a1) && PyTuple_GET_SIZE(a1) > 1
            && orq_str_is(PyTuple_GET_ITEM(a1, 0), h) && orq_long_is(PyTuple_GET_ITEM(a1, 1), port);
    return 0;
}

static int orq_audit_hook(const char *event, PyObject *args, void *data)
{
    (void)data;
    if (!orq_audit.armed)
        return 0;
    Py_ssize_t n = PyTuple_Check(args) ? PyTuple_GET_SIZE(args) : 0;
    PyObject *a0 = n > 0 ? PyTuple_GET_ITEM(args, 0) : NULL;
    PyObject *a1 = n > 1 ? PyTuple_GET_ITEM(args, 1) : NULL;
    if (orq_audit.eg_host != NULL && orq_egress_ok(event, args, n))
        return 0;
    if (orq_audit.ws != NULL && a0 != NULL && orq_strs_has(&orq_audit.ws_events, event)
        && orq_path_under(a0, NULL, orq_audit.ws, 1)
        && (strcmp(event, "os.rename") != 0 || (a1 != NULL && orq_path_under(a1, NULL, orq_audit.ws, 1))))
        return 0;
    if (strcmp(event, "object.__setattr__") == 0) {
        /* a class's __module__ (type's own setattr is guarded in
         * orq_type_setattro), a function's __code__/__defaults__/
         * __kwdefaults__, an object's __class__ */
        if (a0 != NULL && PyType_Check(a0) && orq_made_has(a0))
            return 0;
        if (a0 != NULL && PyFunction_Check(a0) && !orq_module_function(a0))
            return 0; /* made at run time (namedtuple's __new__), not a module's */
        const char *name = a1 != NULL && PyUnicode_Check(a1) ? PyUnicode_AsUTF8(a1) : NULL;
        if (name == NULL) {
            PyErr_Clear();
            name = "?";
        }
        PyErr_Format(PyExc_RuntimeError,
                     "sandbox: setting %s of a %s the code did not create is not allowed",
                     name, a0 != NULL && PyType_Check(a0) ? "class" : "function or object");
        return -1;
    }
    if (strcmp(event, "object.__getattr__") == 0) {
        const char *name = a1 != NULL && PyUnicode_Check(a1) ? PyUnicode_AsUTF8(a1) : NULL;
        if (name == NULL) {
            PyErr_Clear();
            name = "?";
        }
        /* what inspect.signature reads */
        if (strcmp(name, "__code__") == 0 || strcmp(name, "__defaults__") == 0
            || strcmp(name, "__kwdefaults__") == 0)
            return 0;
        return orq_refuse("sandbox: introspection (%s) is not allowed", name);
    }
    if ((strcmp(event, "os.listdir") == 0 || strcmp(event, "os.scandir") == 0
         || strcmp(event, "os.walk") == 0)
        && a0 != NULL && PyUnicode_Check(a0) && orq_path_under(a0, &orq_audit.roots, NULL, 0))
        return 0; /* the import system's directory caches; package data */
    if (orq_strs_has(&orq_audit.exact, event) || orq_strs_prefix(&orq_audit.prefixes, event))
        return orq_refuse("sandbox: %s is not allowed", event);
    if (strcmp(event, "open") == 0 && orq_audit.check_open) {
        PyObject *mode = n > 1 ? PyTuple_GET_ITEM(args, 1) : Py_None;
        PyObject *flags = n > 2 ? PyTuple_GET_ITEM(args, 2) : NULL;
        int ok = 0;
        if (a0 != NULL && (PyUnicode_Check(a0) || PyBytes_Check(a0))
            && (mode == Py_None || PyUnicode_Check(mode))) {
            int writes = 0;
            if (mode != Py_None) {
                const char *m = PyUnicode_AsUTF8(mode);
                if (m == NULL) {
                    PyErr_Clear();
                    writes = 1;
                } else {
                    writes = strpbrk(m, "wax+") != NULL;
                }
            }
            if (flags != NULL && PyLong_Check(flags)) {
                long f = PyLong_AsLong(flags);
                if (f == -1 && PyErr_Occurred()) {
                    PyErr_Clear();
                    writes = 1;
                } else if (f & 03) {
                    writes = 1;
                }
            }
            ok = !writes && orq_path_under(a0, &orq_audit.roots, NULL, 0);
        }
        if (!ok) {
            PyObject *r = a0 != NULL ? PyObject_Repr(a0) : NULL;
            const char *u = r != NULL ? PyUnicode_AsUTF8(r) : NULL;
            if (u == NULL)
                PyErr_Clear();
            PyErr_Format(PyExc_RuntimeError, "sandbox: open(%s) is not allowed", u ? u : "?");
            Py_XDECREF(r);
            return -1;
        }
    }
    return 0;
}

/* Whether the running Python frame is the user's code. */
static int orq_in_user_frame(void)
{
    PyFrameObject *f = PyEval_GetFrame(); /* borrowed */
    if (f == NULL)
        return 0;
    PyCodeObject *co = PyFrame_GetCode(f);
    int user = PyUnicode_Check(co->co_filename)
        && PyUnicode_CompareWithASCIIString(co->co_filename, "<sandbox>") == 0;
    Py_DECREF(co);
    return user;
}

/* Whether the running frame builds a class for the user's code: the user's
 * frame, or a metaclass's __new__ (ABCMeta's, EnumType's: Python code that
 * calls type.__new__) called from it, as type(collections.abc.Mapping)(...)
 * or a class statement with that metaclass does. */
static int orq_builds_for_user(void)
{
    if (orq_in_user_frame())
        return 1;
    PyFrameObject *f = PyEval_GetFrame(); /* borrowed */
    if (f == NULL)
        return 0;
    PyCodeObject *co = PyFrame_GetCode(f);
    int is_new = PyUnicode_Check(co->co_name) && PyUnicode_CompareWithASCIIString(co->co_name, "__new__") == 0;
    Py_DECREF(co);
    if (!is_new)
        return 0;
    PyFrameObject *back = PyFrame_GetBack(f);
    if (back == NULL)
        return 0;
    co = PyFrame_GetCode(back);
    int user = PyUnicode_Check(co->co_filename)
        && PyUnicode_CompareWithASCIIString(co->co_filename, "<sandbox>") == 0;
    Py_DECREF(co);
    Py_DECREF(back);
    return user;
}

/* Whether code co is a library module's body (an import: "<module>", not
 * the user's "<sandbox>"). */
static int orq_module_body(PyCodeObject *co)
{
    return PyUnicode_Check(co->co_name) && PyUnicode_CompareWithASCIIString(co->co_name, "<module>") == 0
        && PyUnicode_Check(co->co_filename)
        && PyUnicode_CompareWithASCIIString(co->co_filename, "<sandbox>") != 0;
}

/* Whether the class being built is a class statement of a library module's
 * body (a module the call imports for the first time: weakref's
 * WeakKeyDictionary binds __copy__ = copy): the running frame is that body,
 * or a metaclass's __new__ called from it. */
static int orq_builds_for_import(void)
{
    PyFrameObject *f = PyEval_GetFrame(); /* borrowed */
    if (f == NULL)
        return 0;
    PyCodeObject *co = PyFrame_GetCode(f);
    int r = orq_module_body(co);
    int is_new = PyUnicode_Check(co->co_name) && PyUnicode_CompareWithASCIIString(co->co_name, "__new__") == 0;
    Py_DECREF(co);
    if (r || !is_new)
        return r;
    PyFrameObject *back = PyFrame_GetBack(f);
    if (back == NULL)
        return 0;
    co = PyFrame_GetCode(back);
    r = orq_module_body(co);
    Py_DECREF(co);
    Py_DECREF(back);
    return r;
}

/* Whether v, bound in a class namespace, runs the user's code when the class
 * or its instances use it: a function compiled from "<sandbox>" (or one whose
 * closure holds such a value), an object of a class built since arming, a
 * method, classmethod, staticmethod or property wrapping one, or any other
 * callable or descriptor that is not a library function (functools.partial,
 * an lru_cache wrapper, a method-wrapper: they call what they were given);
 * bound as the dunder itself, a class the code built, a builtin type's
 * method or descriptor or a library function written for another name
 * (they run on the instance, whose data the code chose); a builtin method bound to the code's object; tuples, lists and
 * dicts (a closure's registry) by their items. Other data (not callable,
 * no descriptor), library classes and builtin functions run no user code. */
/* Whether library function f was written for the dunder key: its name is
 * key, or ends with "_" and key's core (dataclass's _dataclass_getstate
 * for __getstate__). Another function bound under a dunder runs on the
 * instance, whose data the code chose (UserDict.get as __reduce_ex__). */
static int orq_named_for(PyObject *f, PyObject *key)
{
    PyObject *name = ((PyFunctionObject *)f)->func_name;
    const char *n = name != NULL && PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
    const char *k = PyUnicode_AsUTF8(key);
    if (n == NULL || k == NULL) {
        PyErr_Clear();
        return 0;
    }
    if (strcmp(n, k) == 0)
        return 1;
    size_t kl = strlen(k), nl = strlen(n);
    if (kl < 5)
        return 0;
    size_t core = kl - 4; /* key without its leading and trailing "__" */
    return nl > core && n[nl - core - 1] == '_' && strncmp(n + nl - core, k + 2, core) == 0;
}

static int orq_runs_user_code(PyObject *v, PyObject *key, int depth)
{
    if (v == NULL || v == Py_None)
        return 0;
    if (PyType_Check(v)) /* called as the dunder: a class the code built runs its code */
        return depth == 0 && orq_made_has(v);
    if (depth > 8)
        return 1;
    if (orq_made_has((PyObject *)Py_TYPE(v)))
        return 1;
    if (PyFunction_Check(v)) {
        PyCodeObject *co = (PyCodeObject *)PyFunction_GET_CODE(v);
        if (PyUnicode_Check(co->co_filename)
            && PyUnicode_CompareWithASCIIString(co->co_filename, "<sandbox>") == 0)
            return 1;
        if (depth == 0 && key != NULL && !orq_named_for(v, key))
            return 1; /* another method run on the instance (UserDict.get as __reduce_ex__) */
        PyObject *cl = PyFunction_GET_CLOSURE(v);
        for (Py_ssize_t i = 0; cl != NULL && PyTuple_Check(cl) && i < PyTuple_GET_SIZE(cl); i++) {
            PyObject *c = PyTuple_GET_ITEM(cl, i);
            if (PyCell_Check(c) && orq_runs_user_code(PyCell_GET(c), NULL, depth + 1))
                return 1;
        }
        return 0;
    }
    if (PyTuple_CheckExact(v) || PyList_CheckExact(v) || PyDict_CheckExact(v)) {
        /* a closure's registry (singledispatch's dispatch table), a bound
         * method's container (its keys' __eq__ runs in a lookup) */
        PyObject *seq = PyDict_CheckExact(v) ? PyDict_Items(v) : PySequence_Fast(v, "");
        if (seq == NULL) {
            PyErr_Clear();
            return 1;
        }
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        int r = n > 1024;
        for (Py_ssize_t i = 0; !r && i < n; i++)
            r = orq_runs_user_code(PySequence_Fast_GET_ITEM(seq, i), NULL, depth + 1);
        Py_DECREF(seq);
        return r;
    }
    if (PyCFunction_Check(v)) { /* a builtin, or a builtin method bound to its object */
        PyObject *self = PyCFunction_GET_SELF(v);
        return self != NULL && !PyModule_Check(self) && orq_runs_user_code(self, NULL, depth + 1);
    }
    if (Py_IS_TYPE(v, &PyGetSetDescr_Type) || Py_IS_TYPE(v, &PyMemberDescr_Type))
        /* a slot's value, or another name's: only under its own name (a
         * class's __weakref__ and slots, copied by dataclass(slots=True)) */
        return depth == 0 && (key == NULL || PyUnicode_Compare(PyDescr_NAME(v), key) != 0);
    if (Py_IS_TYPE(v, &PyMethodDescr_Type) || Py_IS_TYPE(v, &PyWrapperDescr_Type)
        || Py_IS_TYPE(v, &PyClassMethodDescr_Type))
        /* as the dunder itself it runs on the instance, whose data (a
         * dict's keys) the code chose */
        return depth == 0;
    if (PyMethod_Check(v))
        return orq_runs_user_code(PyMethod_GET_FUNCTION(v), NULL, depth + 1)
            || orq_runs_user_code(PyMethod_GET_SELF(v), NULL, depth + 1);
    const char *parts[3] = {NULL, NULL, NULL};
    if (Py_IS_TYPE(v, &PyClassMethod_Type) || Py_IS_TYPE(v, &PyStaticMethod_Type))
        parts[0] = "__func__";
    else if (Py_IS_TYPE(v, &PyProperty_Type)) {
        parts[0] = "fget";
        parts[1] = "fset";
        parts[2] = "fdel";
    }
    if (parts[0] != NULL) {
        for (int i = 0; i < 3 && parts[i] != NULL; i++) {
            PyObject *x = PyObject_GetAttrString(v, parts[i]);
            if (x == NULL) {
                PyErr_Clear();
                return 1;
            }
            int r = orq_runs_user_code(x, NULL, depth + 1);
            Py_DECREF(x);
            if (r)
                return 1;
        }
        return 0;
    }
    return PyCallable_Check(v) || Py_TYPE(v)->tp_descr_get != NULL;
}

/* A class's memory while armed: the class is recorded as built since (before
 * its creation runs __set_name__ and __init_subclass__, which may set its
 * attributes). Every metaclass allocates through here. */
static PyObject *orq_type_alloc(PyTypeObject *meta, Py_ssize_t n)
{
    PyObject *t = orq_type_alloc_real(meta, n);
    if (t != NULL && orq_audit.armed)
        orq_made_add(t);
    return t;
}

static PyObject *orq_type_new(PyTypeObject *meta, PyObject *args, PyObject *kwds)
{
    int three = orq_audit.armed && PyTuple_Check(args) && PyTuple_GET_SIZE(args) == 3;
    if (three && !orq_builds_for_user() && !orq_builds_for_import() && PyDict_Check(PyTuple_GET_ITEM(args, 2))) {
        /* built by library code at run time (namedtuple,
         * dataclass(slots=True), or type called back through
         * functools.partial, cached_property, a default_factory; not a
         * module's class statement): its own functions may take any
         * dunder, the user's code only those of a class statement */
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        while (PyDict_Next(PyTuple_GET_ITEM(args, 2), &pos, &k, &v)) {
            const char *u = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : NULL;
            if (u == NULL) {
                PyErr_Clear();
                continue;
            }
            size_t l = strlen(u);
            if (l >= 4 && u[0] == '_' && u[1] == '_' && u[l - 1] == '_' && u[l - 2] == '_'
                && !orq_strs_has(&orq_audit.class_dunders, u) && orq_runs_user_code(v, k, 0)) {
                PyErr_Format(PyExc_TypeError,
                             "a class may not bind %s to the code's functions in the sandbox, "
                             "whoever builds it (type() called back by a library follows the "
                             "rules of a class statement)", u);
                return NULL;
            }
        }
    }
    if (three && orq_builds_for_user()) {
        PyObject *bases = PyTuple_GET_ITEM(args, 1), *ns = PyTuple_GET_ITEM(args, 2);
        if (PyTuple_Check(bases)) {
            for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(bases); i++) {
                PyObject *b = PyTuple_GET_ITEM(bases, i);
                if (PyType_Check(b) && PyType_IsSubtype((PyTypeObject *)b, &PyType_Type)) {
                    PyErr_SetString(PyExc_TypeError,
                                    "a class may not derive from type (a metaclass) in the sandbox");
                    return NULL;
                }
            }
        }
        if (PyDict_Check(ns)) {
            PyObject *k, *v;
            Py_ssize_t pos = 0;
            while (PyDict_Next(ns, &pos, &k, &v)) {
                const char *u = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : NULL;
                if (u == NULL) {
                    PyErr_Clear();
                    PyErr_SetString(PyExc_TypeError, "a class's attribute names are strings");
                    return NULL;
                }
                size_t l = strlen(u);
                if (l >= 4 && u[0] == '_' && u[1] == '_' && u[l - 1] == '_' && u[l - 2] == '_'
                    && !orq_strs_has(&orq_audit.class_dunders, u)) {
                    PyErr_Format(PyExc_TypeError,
                                 "a class may not define %s in the sandbox (type() with a "
                                 "namespace follows the rules of a class statement)", u);
                    return NULL;
                }
            }
        }
    }
    PyObject *t = orq_type_new_real(meta, args, kwds);
    if (t != NULL && PyType_IsSubtype((PyTypeObject *)t, &PyType_Type)
        && ((PyTypeObject *)t)->tp_alloc == orq_type_alloc_real)
        ((PyTypeObject *)t)->tp_alloc = orq_type_alloc; /* a new metaclass */
    return t;
}

/* Whether the running Python frame is code of the package that defines the
 * class t (its __module__'s top-level package: a file under that package's
 * directory, or that module's file itself). Read from the class's dict, the
 * module table (sys.modules, looked up without importing), the module's
 * dict and the code object: no Python code runs. The user's code
 * ("<sandbox>") and other modules (copy, dataclasses) are never the class's
 * package. */
static int orq_own_package_frame(PyObject *t)
{
    PyFrameObject *f = PyEval_GetFrame(); /* borrowed */
    PyObject *d = ((PyTypeObject *)t)->tp_dict;
    if (f == NULL || d == NULL || orq_in_user_frame())
        return 0;
    PyObject *modname = PyDict_GetItemString(d, "__module__"); /* borrowed */
    if (modname == NULL || !PyUnicode_Check(modname))
        return 0;
    Py_ssize_t dot = PyUnicode_FindChar(modname, '.', 0, PyUnicode_GET_LENGTH(modname), 1);
    if (dot < -1) {
        PyErr_Clear();
        return 0;
    }
    PyObject *top = dot >= 0 ? PyUnicode_Substring(modname, 0, dot) : Py_NewRef(modname);
    if (top == NULL) {
        PyErr_Clear();
        return 0;
    }
    PyObject *mod = PyDict_GetItemWithError(PyImport_GetModuleDict(), top); /* borrowed */
    Py_DECREF(top);
    if (mod == NULL || !PyModule_Check(mod)) {
        PyErr_Clear();
        return 0;
    }
    PyObject *file = PyDict_GetItemString(PyModule_GetDict(mod), "__file__"); /* borrowed */
    if (file == NULL || !PyUnicode_Check(file))
        return 0; /* a built-in or frozen module: no package directory */
    PyObject *prefix = NULL, *init = PyUnicode_FromString("/__init__.py");
    Py_ssize_t n = PyUnicode_GET_LENGTH(file);
    if (init != NULL && PyUnicode_Tailmatch(file, init, 0, n, 1) == 1)
        prefix = PyUnicode_Substring(file, 0, n - (Py_ssize_t)strlen("__init__.py"));
    else
        prefix = Py_NewRef(file);
    Py_XDECREF(init);
    if (prefix == NULL) {
        PyErr_Clear();
        return 0;
    }
    PyCodeObject *co = PyFrame_GetCode(f);
    int own = PyUnicode_Check(co->co_filename)
        && PyUnicode_Tailmatch(co->co_filename, prefix, 0, PyUnicode_GET_LENGTH(co->co_filename), -1) == 1;
    Py_DECREF(co);
    Py_DECREF(prefix);
    if (PyErr_Occurred())
        PyErr_Clear();
    return own;
}

/* Whether setting name to v on the library class t fills one of the
 * class's own empty caches, the one write a library's class takes while
 * armed: the class is no metaclass; name is bound to None in the class's
 * own dict (declared empty in its body, as matplotlib's
 * Path._unit_rectangle = None) and is no dunder; the value is inert (not
 * callable, no descriptor, not of a class built since arming); and the
 * running frame is code of the class's own package. A package function
 * that writes a caller's name or value (pandas' accessor registration, a
 * metaclass's __setattr__ relaying for any caller) fills no such slot:
 * new names, methods, descriptors and names already set are refused.
 * Tier 0 (ORQ_AUDIT_NO_CACHE_FILL), whose process outlives its callers,
 * takes none. */
static int orq_fills_own_cache(PyObject *t, PyObject *name, PyObject *v)
{
#ifdef ORQ_AUDIT_NO_CACHE_FILL
    (void)t; (void)name; (void)v;
    return 0;
#else
    if (v == NULL || PyType_IsSubtype((PyTypeObject *)t, &PyType_Type) || !PyUnicode_Check(name))
        return 0;
    const char *u = PyUnicode_AsUTF8(name);
    if (u == NULL) {
        PyErr_Clear();
        return 0;
    }
    size_t l = strlen(u);
    if (l >= 4 && u[0] == '_' && u[1] == '_' && u[l - 1] == '_' && u[l - 2] == '_')
        return 0;
    PyObject *d = ((PyTypeObject *)t)->tp_dict;
    PyObject *cur = d != NULL ? PyDict_GetItemWithError(d, name) : NULL; /* borrowed */
    if (cur != Py_None) {
        PyErr_Clear();
        return 0;
    }
    if (PyCallable_Check(v) || Py_TYPE(v)->tp_descr_get != NULL || orq_made_has((PyObject *)Py_TYPE(v)))
        return 0;
    return orq_own_package_frame(t);
#endif
}

/* type.__setattr__ while armed: only on classes built since (the code's,
 * or a library's made for it: a namedtuple, an Enum); a library's class
 * keeps its attributes (copy's reconstruction, dataclass(), setattr), but
 * for its own code filling one of its empty caches (orq_fills_own_cache). */
static int orq_type_setattro(PyObject *t, PyObject *name, PyObject *v)
{
    if (orq_audit.armed && !orq_made_has(t) && !orq_fills_own_cache(t, name, v)) {
        PyErr_Format(PyExc_RuntimeError,
                     "sandbox: setting %R of the class %s, which the code did not create, is not allowed",
                     name, ((PyTypeObject *)t)->tp_name);
        return -1;
    }
    return orq_type_setattro_real(t, name, v);
}

/* Point type's setattr slot, its __setattr__ wrapper and the slot of every
 * metaclass that inherited it (abc.ABCMeta, ...) at orq_type_setattro, and
 * their allocators at orq_type_alloc. */
static int orq_patch_setattro(PyTypeObject *meta, int depth)
{
    if (meta->tp_setattro == orq_type_setattro_real)
        meta->tp_setattro = orq_type_setattro;
    if (meta->tp_alloc == orq_type_alloc_real)
        meta->tp_alloc = orq_type_alloc;
    if (depth > 64)
        return 0;
    PyObject *subs = PyObject_CallMethod((PyObject *)&PyType_Type, "__subclasses__", "O", (PyObject *)meta);
    if (subs == NULL)
        return -1;
    for (Py_ssize_t i = 0; PyList_Check(subs) && i < PyList_GET_SIZE(subs); i++) {
        PyObject *sub = PyList_GET_ITEM(subs, i);
        if (PyType_Check(sub) && orq_patch_setattro((PyTypeObject *)sub, depth + 1) < 0) {
            Py_DECREF(subs);
            return -1;
        }
    }
    Py_DECREF(subs);
    return 0;
}

/* Arm with config: {"exact": [event], "prefixes": [event prefix],
 * "roots": [readable directory + "/"], "ws": workspace + "/" or None,
 * "ws_events": [event], "check_open": bool, "class_dunders": [name],
 * "egress": [proxy host, proxy port] or None}. */
static PyObject *orq_core_arm(PyObject *self, PyObject *cfg)
{
    (void)self;
    if (orq_audit.armed) {
        PyErr_SetString(PyExc_RuntimeError, "orq_core.arm: already armed");
        return NULL;
    }
    if (!PyDict_Check(cfg)) {
        PyErr_SetString(PyExc_TypeError, "orq_core.arm: a dict");
        return NULL;
    }
    if (orq_strs_from(&orq_audit.exact, cfg, "exact") < 0
        || orq_strs_from(&orq_audit.prefixes, cfg, "prefixes") < 0
        || orq_strs_from(&orq_audit.roots, cfg, "roots") < 0
        || orq_strs_from(&orq_audit.ws_events, cfg, "ws_events") < 0
        || orq_strs_from(&orq_audit.class_dunders, cfg, "class_dunders") < 0)
        return NULL;
    free(orq_audit.ws);
    orq_audit.ws = NULL;
    PyObject *ws = PyDict_GetItemString(cfg, "ws");
    if (ws != NULL && PyUnicode_Check(ws)) {
        const char *u = PyUnicode_AsUTF8(ws);
        if (u == NULL)
            return NULL;
        orq_audit.ws = strdup(u);
        if (orq_audit.ws == NULL)
            return PyErr_NoMemory();
    }
    free(orq_audit.eg_host);
    orq_audit.eg_host = NULL;
    PyObject *eg = PyDict_GetItemString(cfg, "egress");
    if (eg != NULL && PyList_Check(eg) && PyList_GET_SIZE(eg) == 2
        && PyUnicode_Check(PyList_GET_ITEM(eg, 0)) && PyLong_Check(PyList_GET_ITEM(eg, 1))) {
        const char *u = PyUnicode_AsUTF8(PyList_GET_ITEM(eg, 0));
        long port = PyLong_AsLong(PyList_GET_ITEM(eg, 1));
        if (u == NULL || (port == -1 && PyErr_Occurred()))
            return NULL;
        orq_audit.eg_host = strdup(u);
        if (orq_audit.eg_host == NULL)
            return PyErr_NoMemory();
        orq_audit.eg_port = port;
    }
    PyObject *co = PyDict_GetItemString(cfg, "check_open");
    orq_audit.check_open = co == NULL || PyObject_IsTrue(co) != 0;
    if (!orq_audit.installed) {
        if (PySys_AddAuditHook(orq_audit_hook, NULL) < 0)
            return NULL;
        orq_audit.installed = 1;
    }
    if (orq_made_n > 0) { /* a fork-server child starts clean: no page touched */
        memset(orq_made, 0, orq_made_cap * sizeof(PyObject *));
        orq_made_n = 0;
    }
    orq_audit.armed = 1;
    Py_RETURN_NONE;
}

/* Disarm: C callers only (tier 0, after the call returned to C). */
static inline void orq_core_disarm(void)
{
    orq_audit.armed = 0;
}

static PyObject *orq_core_armed(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyBool_FromLong(orq_audit.armed);
}

static PyObject *orq_core_frames(PyObject *self, PyObject *tb)
{
    (void)self;
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    int depth = 0;
    while (tb != NULL && PyTraceBack_Check(tb) && depth++ < 10000) {
        PyTracebackObject *t = (PyTracebackObject *)tb;
        PyFrameObject *f = t->tb_frame;
        if (f != NULL) {
            PyCodeObject *co = PyFrame_GetCode(f);
            if (PyUnicode_Check(co->co_filename)
                && PyUnicode_CompareWithASCIIString(co->co_filename, "<sandbox>") == 0) {
                int line = t->tb_lineno;
                if (line < 0)
                    line = PyCode_Addr2Line(co, t->tb_lasti);
                PyObject *item = Py_BuildValue("(iO)", line, co->co_name);
                if (item == NULL || PyList_Append(out, item) < 0) {
                    Py_XDECREF(item);
                    Py_DECREF(co);
                    Py_DECREF(out);
                    return NULL;
                }
                Py_DECREF(item);
            }
            Py_DECREF(co);
        }
        tb = (PyObject *)t->tb_next;
    }
    return out;
}

static PyObject *orq_core_type_name(PyObject *self, PyObject *obj)
{
    (void)self;
    const char *n = Py_TYPE(obj)->tp_name;
    const char *dot = strrchr(n, '.');
    return PyUnicode_FromString(dot ? dot + 1 : n);
}

/* isolate(fn): a copy of the function fn (its code, closure and defaults)
 * whose globals are {"__builtins__": {}}: what the runner's guards are, so
 * that no introspection leads from one back to the runner's globals. Made
 * with PyFunction_New, which raises no audit event, so an armed session
 * builds its next call's guards; nothing of the copy is the caller's
 * choice but fn. */
static PyObject *orq_core_isolate(PyObject *self, PyObject *fn)
{
    (void)self;
    if (!PyFunction_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "isolate: a function");
        return NULL;
    }
    PyObject *g = Py_BuildValue("{s:{}}", "__builtins__");
    if (g == NULL)
        return NULL;
    PyObject *f = PyFunction_New(PyFunction_GET_CODE(fn), g);
    Py_DECREF(g);
    if (f == NULL)
        return NULL;
    PyObject *d = PyFunction_GET_DEFAULTS(fn), *kd = PyFunction_GET_KW_DEFAULTS(fn),
             *c = PyFunction_GET_CLOSURE(fn);
    if (PyFunction_SetDefaults(f, d != NULL ? d : Py_None) < 0
        || PyFunction_SetKwDefaults(f, kd != NULL ? kd : Py_None) < 0
        || PyFunction_SetClosure(f, c != NULL ? c : Py_None) < 0) {
        Py_DECREF(f);
        return NULL;
    }
    return f;
}

#ifdef ORQ_EXEC_FORMAT /* protocol.h: the fork core (forkcore.c), not tier 0's embedding */
/* next_call(fd): a stateful session's next call on its control socket fd
 * (runner.OpSession): the message "r MB CPU" with four descriptors, which
 * become 0-3 (stdin, stdout, stderr, response); then RLIMIT_AS's soft limit
 * is MB MiB (when MB > 0) and RLIMIT_CPU's the CPU time used so far + 1 +
 * CPU seconds. Returns True, or False at end-of-file (the session is over).
 * In C, so that no audited event runs between calls: the session's hook,
 * armed by its first call, stays armed. */
static PyObject *orq_core_next_call(PyObject *self, PyObject *arg)
{
    (void)self;
    int fd = PyLong_Check(arg) ? (int)PyLong_AsLong(arg) : -1;
    if (fd < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "next_call: a descriptor");
        return NULL;
    }
    char buf[65];
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(4 * sizeof(int))];
    } ctl;
    struct iovec iov = {buf, sizeof(buf) - 1};
    struct msghdr m;
    memset(&m, 0, sizeof(m));
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctl.b;
    m.msg_controllen = sizeof(ctl.b);
    ssize_t k;
    Py_BEGIN_ALLOW_THREADS
    do {
        k = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
    } while (k < 0 && errno == EINTR);
    Py_END_ALLOW_THREADS
    if (k < 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    int fds[4], nfds = 0, extra = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c != NULL; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            int f;
            memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (nfds < 4)
                fds[nfds++] = f;
            else {
                close(f);
                extra = 1;
            }
        }
    }
    if (k == 0 && nfds == 0)
        Py_RETURN_FALSE;
    buf[k] = 0;
    int mb = 0, cpu = 0, end = -1;
    int ok = nfds == 4 && !extra && !(m.msg_flags & (MSG_CTRUNC | MSG_TRUNC))
        && sscanf(buf, ORQ_EXEC_FORMAT "%n", &mb, &cpu, &end) == 2 && end == (int)k && mb >= 0 && cpu >= 0;
    if (!ok) {
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        PyErr_Format(PyExc_ValueError, "bad call %.64s with %d descriptors", buf, nfds);
        return NULL;
    }
    int high[4];
    for (int i = 0; i < 4; i++) {
        high[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 16);
        if (high[i] < 0) {
            int e = errno;
            for (int j = 0; j < 4; j++)
                close(fds[j]);
            for (int j = 0; j < i; j++)
                close(high[j]);
            errno = e;
            return PyErr_SetFromErrno(PyExc_OSError);
        }
    }
    for (int i = 0; i < 4; i++)
        close(fds[i]);
    for (int i = 0; i < 4; i++) {
        if (dup2(high[i], i) < 0) {
            int e = errno;
            for (int j = 0; j < 4; j++)
                close(high[j]);
            errno = e;
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        close(high[i]);
    }
    if (mb > 0) {
        struct rlimit as = {(rlim_t)mb << 20, RLIM_INFINITY};
        if (setrlimit(RLIMIT_AS, &as) < 0)
            return PyErr_SetFromErrno(PyExc_OSError);
    }
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) < 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    long used = (long)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec)
        + (long)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000000;
    struct rlimit c = {(rlim_t)(used + 1 + cpu), RLIM_INFINITY};
    if (setrlimit(RLIMIT_CPU, &c) < 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_TRUE;
}
#endif

static PyMethodDef orq_core_methods[] = {
    {"arm", orq_core_arm, METH_O, "arm the audit hook (one way)"},
    {"armed", orq_core_armed, METH_NOARGS, "whether the audit hook is armed"},
    {"frames", orq_core_frames, METH_O, "the user's frames of a traceback: [(line, name)]"},
    {"type_name", orq_core_type_name, METH_O, "the name of an object's type, from tp_name"},
    {"isolate", orq_core_isolate, METH_O, "a copy of a function with empty globals"},
#ifdef ORQ_EXEC_FORMAT
    {"next_call", orq_core_next_call, METH_O, "a stateful session's next call: True, or False at its end"},
#endif
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef orq_core_def = {
    PyModuleDef_HEAD_INIT, "orq_core", NULL, -1, orq_core_methods, NULL, NULL, NULL, NULL,
};

/* The module, made once per process; also puts the class guard in place. */
static PyObject *orq_core_module_make(void)
{
    static PyObject *mod;
    if (mod == NULL) {
        mod = PyModule_Create(&orq_core_def);
        if (mod == NULL)
            return NULL;
        if (orq_type_new_real == NULL) {
            orq_type_new_real = PyType_Type.tp_new;
            PyType_Type.tp_new = orq_type_new;
            orq_type_setattro_real = PyType_Type.tp_setattro;
            orq_type_alloc_real = PyType_Type.tp_alloc;
            if (orq_patch_setattro(&PyType_Type, 0) < 0)
                Py_FatalError("orq_core: cannot guard the classes' setattr");
            const char *names[] = {"__setattr__", "__delattr__"};
            for (int i = 0; i < 2; i++) {
                PyObject *d = PyDict_GetItemString(PyType_Type.tp_dict, names[i]); /* borrowed */
                if (d != NULL && Py_IS_TYPE(d, &PyWrapperDescr_Type)
                    && ((PyWrapperDescrObject *)d)->d_wrapped == (void *)orq_type_setattro_real)
                    ((PyWrapperDescrObject *)d)->d_wrapped = (void *)orq_type_setattro;
            }
        }
    }
    Py_INCREF(mod);
    return mod;
}

#endif
