/* The JSON grammar of the stream parser, compiled: the same state machine as
 * ``_stream_json.py`` (which stays the reference and the fallback when no C compiler was
 * available at install time), giving the same events, values and errors chunk for chunk.
 *
 * Why C: a push parser costs at least one call and one event per chunk. In Python that floor
 * alone is 4-8x one ``json.loads`` of the whole document at 16-byte chunks, so the
 * issue's 10x target cannot be met there. Here a chunk inside a long string costs one scan,
 * one event allocation and one list append.
 *
 * Events are instances of the frozen, slotted dataclasses in ``events.py``: they are
 * allocated with the class's own ``tp_alloc`` and their slots are filled through the offsets
 * of the classes' member descriptors, which ``configure()`` reads and checks once. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

enum { PRE, FENCE_INFO, VALUE, KEY, SEP, AFTER, STR, BARE, DONE };

#define EXCERPT 24
#define MAX_DEPTH 1000 /* as _MAX_DEPTH in _stream_core.py (and in the message below) */
#define MAX_PIECES 255 /* a long string's pieces are joined into a block past this many */

typedef struct {
    PyTypeObject *type;
    Py_ssize_t a, b; /* slot offsets: ``path`` and the second field (or -1) */
} EventClass;

static EventClass E_DELTA, E_START, E_END, E_OSTART, E_OEND, E_ASTART, E_AEND;
static PyObject *ParseError; /* StreamParseError */
static PyObject *EMPTY;      /* "" */

#define RD(k) PyUnicode_READ(kind, data, (k))
#define IS_WS(c) ((c) == ' ' || (c) == '\t' || (c) == '\r' || (c) == '\n')
#define IS_DIGIT(c) ((c) >= '0' && (c) <= '9')

/* -- events ---------------------------------------------------------------------------- */

static PyObject *
event(EventClass *e, PyObject *a, PyObject *b)
{
    PyObject *ev = e->type->tp_alloc(e->type, 0);
    if (ev == NULL)
        return NULL;
    *(PyObject **)((char *)ev + e->a) = Py_NewRef(a);
    if (e->b >= 0)
        *(PyObject **)((char *)ev + e->b) = Py_NewRef(b);
    return ev;
}

static int
slot_offset(PyObject *cls, const char *name, Py_ssize_t *offset)
{
    PyObject *d = PyObject_GetAttrString(cls, name);
    if (d == NULL)
        return -1;
    if (!PyObject_TypeCheck(d, &PyMemberDescr_Type) ||
        ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX) {
        Py_DECREF(d);
        PyErr_Format(PyExc_TypeError, "%R.%s is not an object slot", cls, name);
        return -1;
    }
    *offset = ((PyMemberDescrObject *)d)->d_member->offset;
    Py_DECREF(d);
    return 0;
}

static int
set_class(EventClass *e, PyObject *cls, const char *a, const char *b)
{
    if (!PyType_Check(cls)) {
        PyErr_Format(PyExc_TypeError, "expected an event class, got %R", cls);
        return -1;
    }
    if (slot_offset(cls, a, &e->a) < 0)
        return -1;
    e->b = -1;
    if (b != NULL && slot_offset(cls, b, &e->b) < 0)
        return -1;
    Py_XSETREF(e->type, (PyTypeObject *)Py_NewRef(cls));
    return 0;
}

static PyObject *
configure(PyObject *module, PyObject *args)
{
    PyObject *error, *delta, *start, *end, *ostart, *oend, *astart, *aend;
    if (!PyArg_ParseTuple(args, "OOOOOOOO:configure", &error, &delta, &start, &end, &ostart,
                          &oend, &astart, &aend))
        return NULL;
    if (set_class(&E_DELTA, delta, "path", "delta") < 0 ||
        set_class(&E_START, start, "path", NULL) < 0 ||
        set_class(&E_END, end, "path", "value") < 0 ||
        set_class(&E_OSTART, ostart, "path", "name") < 0 ||
        set_class(&E_OEND, oend, "path", NULL) < 0 ||
        set_class(&E_ASTART, astart, "path", NULL) < 0 ||
        set_class(&E_AEND, aend, "path", NULL) < 0)
        return NULL;
    Py_XSETREF(ParseError, Py_NewRef(error));
    Py_RETURN_NONE;
}

/* -- the parser object -------------------------------------------------------------------- */

typedef struct {
    PyObject *path;  /* tuple */
    PyObject *value; /* dict or list, filled as values complete */
    PyObject *key;   /* the current key of an object, or NULL */
    int dictlike;
} Frame;

typedef struct {
    PyObject_HEAD
    int state;
    int object_root; /* an unfenced document starts at the first '{' only */
    int is_key;      /* the current string is an object key (no events) */
    Py_ssize_t depth, cap;
    Frame *stack;
    PyObject *path;   /* tuple: where the parser is */
    PyObject *pieces; /* list: the current string or token, in pieces */
    PyObject *blocks; /* list: joined runs of pieces (a long string's past) */
    PyObject *tail;   /* str: text held back until it can be decided (a cut escape, backticks) */
    Py_ssize_t fed;   /* characters fed before the current chunk */
    PyObject *value;  /* the complete document, or NULL */
    PyObject *error;  /* the StreamParseError this parser failed with, or NULL */
    /* Unwrapping {"result": ...} (see _ResultUnwrapper in stream_parser.py, the reference):
     * the root's first events wait in ``held`` until the next event decides. */
    int unwrap;      /* PASS, UNDECIDED or UNWRAP */
    int in_result;   /* the current member of the root object is "result" */
    PyObject *held;  /* list */
} Core;

enum { PASS, UNDECIDED, UNWRAP };

static PyObject *RESULT; /* "result" */

static int
clear_list(PyObject *list)
{
    return PyList_SetSlice(list, 0, PyList_GET_SIZE(list), NULL);
}

/* Whether an event is shown when unwrapping: only those inside a "result" member. */
#define SHOWN(s) ((s)->unwrap == PASS || ((s)->depth >= 1 && (s)->in_result))

static int
emit(Core *s, PyObject *out, EventClass *e, PyObject *a, PyObject *b)
{
    if (s->unwrap == UNDECIDED) {
        if (s->depth == 0 && (e == &E_START || e == &E_OSTART))
            out = s->held; /* the root object's start: wait for its first member */
        else if (s->depth == 1 && e == &E_START && s->in_result) {
            s->unwrap = UNWRAP;
            if (clear_list(s->held) < 0)
                return -1;
        }
        else {
            s->unwrap = PASS;
            if (PyList_SetSlice(out, PY_SSIZE_T_MAX, PY_SSIZE_T_MAX, s->held) < 0 ||
                clear_list(s->held) < 0)
                return -1;
        }
    }
    else if (!SHOWN(s))
        return 0;
    PyObject *ev = event(e, a, b);
    if (ev == NULL)
        return -1;
    int r = PyList_Append(out, ev);
    Py_DECREF(ev);
    return r;
}

static PyObject *
fail(Core *s, const char *message, PyObject *arg1, PyObject *arg2, Py_ssize_t position,
     PyObject *buf, Py_ssize_t i)
{
    /* Build the StreamParseError (message, position, excerpt) and keep it in s->error. The
     * caller unwinds with -1; feed/close attach the chunk's events and raise it. */
    PyObject *msg = PyUnicode_FromFormat(message, arg1, arg2);
    if (msg == NULL)
        return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(buf);
    Py_ssize_t lo = i - EXCERPT > 0 ? i - EXCERPT : 0, hi = i + EXCERPT < n ? i + EXCERPT : n;
    PyObject *excerpt = PyUnicode_Substring(buf, lo, hi > lo ? hi : lo);
    PyObject *args = NULL, *kwargs = NULL, *exc = NULL;
    if (excerpt != NULL && (args = PyTuple_Pack(1, msg)) != NULL &&
        (kwargs = Py_BuildValue("{s:n,s:O}", "position", position, "excerpt", excerpt)) != NULL)
        exc = PyObject_Call(ParseError, args, kwargs);
    Py_DECREF(msg);
    Py_XDECREF(excerpt);
    Py_XDECREF(args);
    Py_XDECREF(kwargs);
    if (exc != NULL)
        Py_XSETREF(s->error, exc);
    return NULL;
}

static int
push(Core *s, int dictlike, PyObject *value)
{
    if (s->depth == s->cap) {
        Py_ssize_t cap = s->cap ? s->cap * 2 : 16;
        Frame *stack = PyMem_Realloc(s->stack, cap * sizeof(Frame));
        if (stack == NULL) {
            Py_DECREF(value);
            PyErr_NoMemory();
            return -1;
        }
        s->stack = stack;
        s->cap = cap;
    }
    Frame *f = &s->stack[s->depth++];
    f->path = Py_NewRef(s->path);
    f->value = value; /* stolen */
    f->key = NULL;
    f->dictlike = dictlike;
    return 0;
}

/* Pop the top frame into the current path; returns its container (a new reference). */
static PyObject *
pop(Core *s)
{
    Frame *f = &s->stack[--s->depth];
    Py_SETREF(s->path, f->path);
    Py_XDECREF(f->key);
    return f->value;
}

static PyObject *
path_plus(PyObject *path, PyObject *step)
{
    Py_ssize_t n = PyTuple_GET_SIZE(path);
    PyObject *t = PyTuple_New(n + 1);
    if (t == NULL)
        return NULL;
    for (Py_ssize_t k = 0; k < n; k++)
        PyTuple_SET_ITEM(t, k, Py_NewRef(PyTuple_GET_ITEM(path, k)));
    PyTuple_SET_ITEM(t, n, Py_NewRef(step));
    return t;
}

static int
set_path(Core *s, PyObject *base, PyObject *step)
{
    PyObject *p = path_plus(base, step);
    if (p == NULL)
        return -1;
    Py_SETREF(s->path, p);
    return 0;
}

static int
add_piece(Core *s, PyObject *piece)
{
    if (PyList_Append(s->pieces, piece) < 0)
        return -1;
    if (PyList_GET_SIZE(s->pieces) > MAX_PIECES) {
        PyObject *block = PyUnicode_Join(EMPTY, s->pieces);
        if (block == NULL)
            return -1;
        int r = PyList_Append(s->blocks, block);
        Py_DECREF(block);
        if (r < 0 || clear_list(s->pieces) < 0)
            return -1;
    }
    return 0;
}

/* The current string or token, joined once; resets the accumulators. */
static PyObject *
take(Core *s)
{
    PyObject *r;
    Py_ssize_t np = PyList_GET_SIZE(s->pieces);
    if (PyList_GET_SIZE(s->blocks)) {
        if (PyList_SetSlice(s->blocks, PY_SSIZE_T_MAX, PY_SSIZE_T_MAX, s->pieces) < 0)
            return NULL;
        r = PyUnicode_Join(EMPTY, s->blocks);
        if (r == NULL || clear_list(s->blocks) < 0) {
            Py_XDECREF(r);
            return NULL;
        }
    }
    else if (np == 1)
        r = Py_NewRef(PyList_GET_ITEM(s->pieces, 0));
    else
        r = PyUnicode_Join(EMPTY, s->pieces);
    if (r != NULL && clear_list(s->pieces) < 0)
        Py_CLEAR(r);
    return r;
}

/* -- strings ------------------------------------------------------------------------------ */

static Py_ssize_t
find_quote_or_backslash(int kind, const void *data, Py_ssize_t i, Py_ssize_t n)
{
    switch (kind) {
    case PyUnicode_1BYTE_KIND: {
        const Py_UCS1 *p = data;
        for (; i < n; i++)
            if (p[i] == '"' || p[i] == '\\')
                return i;
        return n;
    }
    case PyUnicode_2BYTE_KIND: {
        const Py_UCS2 *p = data;
        for (; i < n; i++)
            if (p[i] == '"' || p[i] == '\\')
                return i;
        return n;
    }
    default: {
        const Py_UCS4 *p = data;
        for (; i < n; i++)
            if (p[i] == '"' || p[i] == '\\')
                return i;
        return n;
    }
    }
}

static int
is_high_surrogate_escape(int kind, const void *data, Py_ssize_t r)
{
    Py_UCS4 a = RD(r + 2), b = RD(r + 3);
    return (a == 'd' || a == 'D') && ((b >= '8' && b <= '9') || (b >= 'a' && b <= 'b') ||
                                      (b >= 'A' && b <= 'B'));
}

/* buf[r-6:r] is an unescaped high-surrogate escape \uD8xx..\uDBxx. */
static int
high_surrogate_before(int kind, const void *data, Py_ssize_t i, Py_ssize_t r)
{
    Py_ssize_t s = r - 6, k;
    if (s < i || RD(s) != '\\' || RD(s + 1) != 'u' || !is_high_surrogate_escape(kind, data, s))
        return 0;
    for (k = s; k > i && RD(k - 1) == '\\'; k--)
        ;
    return !((s - k) & 1);
}

/* End of the decodable prefix of string content buf[i:n]: holds back an incomplete escape,
 * and a complete high surrogate at the very end (its low half may follow). */
static Py_ssize_t
safe_cut(int kind, const void *data, Py_ssize_t i, Py_ssize_t n)
{
    Py_ssize_t lo = n - 6 > i ? n - 6 : i, r = -1, k;
    for (k = n - 1; k >= lo; k--)
        if (RD(k) == '\\') {
            r = k;
            break;
        }
    if (r < 0)
        return n;
    for (k = r; k > i && RD(k - 1) == '\\'; k--)
        ;
    if ((r - k) & 1)
        return n;
    if (r + 1 < n && RD(r + 1) != 'u')
        return n; /* a complete two-character escape */
    if (r + 6 > n || is_high_surrogate_escape(kind, data, r))
        return high_surrogate_before(kind, data, i, r) ? r - 6 : r;
    return n;
}

static void
copy_run(Py_UCS4 *out, int kind, const void *data, Py_ssize_t p, Py_ssize_t q)
{
    switch (kind) {
    case PyUnicode_1BYTE_KIND:
        for (const Py_UCS1 *s = (const Py_UCS1 *)data + p, *end = s + (q - p); s < end;)
            *out++ = *s++;
        break;
    case PyUnicode_2BYTE_KIND:
        for (const Py_UCS2 *s = (const Py_UCS2 *)data + p, *end = s + (q - p); s < end;)
            *out++ = *s++;
        break;
    default:
        memcpy(out, (const Py_UCS4 *)data + p, (size_t)(q - p) * sizeof(Py_UCS4));
    }
}

static long
hex4(int kind, const void *data, Py_ssize_t p)
{
    long v = 0;
    for (Py_ssize_t k = p; k < p + 4; k++) {
        Py_UCS4 c = RD(k);
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= c - '0';
        else if (c >= 'a' && c <= 'f')
            v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            v |= c - 'A' + 10;
        else
            return -1;
    }
    return v;
}

/* Decode string content buf[i:e), which holds no unescaped quote, as json.loads would with
 * a closing quote at e (raw control characters allowed). Errors carry json's positions. */
static PyObject *
decode(Core *s, PyObject *buf, int kind, const void *data, Py_ssize_t i, Py_ssize_t e,
       Py_ssize_t base)
{
    Py_UCS4 *out = PyMem_Malloc(sizeof(Py_UCS4) * (size_t)(e - i));
    if (out == NULL)
        return PyErr_NoMemory();
    Py_ssize_t k = 0, p = i, bad = -1;
    const char *what = NULL;
    while (p < e) {
        Py_ssize_t q = find_quote_or_backslash(kind, data, p, e); /* no quote in [i, e) */
        copy_run(out + k, kind, data, p, q);
        k += q - p;
        if ((p = q) == e)
            break;
        Py_UCS4 c, x = p + 1 < e ? RD(p + 1) : 0;
        if (x != 'u') {
            switch (x) {
            case '"': c = '"'; break;
            case '\\': c = '\\'; break;
            case '/': c = '/'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'n': c = '\n'; break;
            case 'r': c = '\r'; break;
            case 't': c = '\t'; break;
            default: what = "invalid \\escape"; bad = p; goto error;
            }
            out[k++] = c;
            p += 2;
            continue;
        }
        long h = p + 6 > e ? -1 : hex4(kind, data, p + 2);
        if (h < 0) {
            what = "invalid \\uxxxx escape";
            bad = p + 1;
            goto error;
        }
        p += 6;
        if (h >= 0xD800 && h <= 0xDBFF && p + 6 <= e && RD(p) == '\\' && RD(p + 1) == 'u') {
            long l = hex4(kind, data, p + 2);
            if (l < 0) {
                what = "invalid \\uxxxx escape";
                bad = p + 1;
                goto error;
            }
            if (l >= 0xDC00 && l <= 0xDFFF) {
                h = 0x10000 + (((h - 0xD800) << 10) | (l - 0xDC00));
                p += 6;
            }
        }
        out[k++] = (Py_UCS4)h;
    }
    PyObject *r = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, out, k);
    PyMem_Free(out);
    return r;
error:
    PyMem_Free(out);
    return fail(s, what, NULL, NULL, base + bad, buf, bad);
}

/* The value completed: record it in its container (or as the document). Steals value. */
static int
finish_value(Core *s, PyObject *value, PyObject *out)
{
    if (emit(s, out, &E_END, s->path, value) < 0)
        goto error;
    if (s->depth) {
        Frame *top = &s->stack[s->depth - 1];
        int r = top->dictlike ? PyDict_SetItem(top->value, top->key, value)
                              : PyList_Append(top->value, value);
        Py_DECREF(value);
        s->state = AFTER;
        return r;
    }
    Py_XSETREF(s->value, value);
    s->state = DONE;
    return 0;
error:
    Py_DECREF(value);
    return -1;
}

/* String content from buf[i]: one delta for what this chunk decodes. Returns the index after
 * the closing quote, or n when the string goes on (a cut escape is held back in tail). */
static Py_ssize_t
string_step(Core *s, PyObject *buf, int kind, const void *data, Py_ssize_t i, Py_ssize_t n,
            Py_ssize_t base, PyObject *out)
{
    Py_ssize_t p = i, q = -1;
    int escapes = 0;
    for (;;) {
        p = find_quote_or_backslash(kind, data, p, n);
        if (p >= n)
            break;
        if (RD(p) == '"') {
            q = p;
            break;
        }
        escapes = 1;
        p += 2;
    }
    Py_ssize_t e = q >= 0 ? q : safe_cut(kind, data, i, n);
    if (e > i) {
        PyObject *seg;
        if (escapes)
            seg = decode(s, buf, kind, data, i, e, base);
        else if (i == 0 && e == n)
            seg = Py_NewRef(buf);
        else
            seg = PyUnicode_Substring(buf, i, e);
        if (seg == NULL)
            return -1;
        int r = add_piece(s, seg);
        if (r == 0 && !s->is_key)
            r = emit(s, out, &E_DELTA, s->path, seg);
        Py_DECREF(seg);
        if (r < 0)
            return -1;
    }
    if (q < 0) {
        if (e < n) {
            PyObject *tail = PyUnicode_Substring(buf, e, n);
            if (tail == NULL)
                return -1;
            Py_SETREF(s->tail, tail);
        }
        return n;
    }
    PyObject *value = take(s);
    if (value == NULL)
        return -1;
    if (s->is_key) {
        Frame *top = &s->stack[s->depth - 1];
        Py_XSETREF(top->key, value);
        s->state = SEP;
    }
    else if (finish_value(s, value, out) < 0)
        return -1;
    return q + 1;
}

/* -- numbers and literals ------------------------------------------------------------------ */

/* End of the longest JSON number at buf[i] (i if there is none). */
static Py_ssize_t
number_end(int kind, const void *data, Py_ssize_t i, Py_ssize_t n)
{
    Py_ssize_t p = i, r;
    if (p < n && RD(p) == '-')
        p++;
    if (p >= n)
        return i;
    Py_UCS4 c = RD(p);
    if (c == '0')
        p++;
    else if (c >= '1' && c <= '9')
        for (p++; p < n && IS_DIGIT(RD(p)); p++)
            ;
    else
        return i;
    if (p + 1 < n && RD(p) == '.' && IS_DIGIT(RD(p + 1)))
        for (p += 2; p < n && IS_DIGIT(RD(p)); p++)
            ;
    if (p < n && (RD(p) == 'e' || RD(p) == 'E')) {
        r = p + 1;
        if (r < n && (RD(r) == '+' || RD(r) == '-'))
            r++;
        if (r < n && IS_DIGIT(RD(r))) {
            for (r++; r < n && IS_DIGIT(RD(r)); r++)
                ;
            p = r;
        }
    }
    return p;
}

/* An int or a float from a JSON number token (ASCII). */
static PyObject *
number_value(PyObject *token)
{
    Py_ssize_t n;
    const char *text = PyUnicode_AsUTF8AndSize(token, &n);
    if (text == NULL)
        return NULL;
    for (Py_ssize_t k = 0; k < n; k++)
        if (text[k] == '.' || text[k] == 'e' || text[k] == 'E') {
            double d = PyOS_string_to_double(text, NULL, NULL);
            if (d == -1.0 && PyErr_Occurred())
                return NULL;
            return PyFloat_FromDouble(d);
        }
    return PyLong_FromString(text, NULL, 10);
}

static int
is_delimiter(Py_UCS4 c)
{
    return IS_WS(c) || c == ',' || c == ']' || c == '}' || c == ')';
}

static int
is_bare(Py_UCS4 c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || IS_DIGIT(c) || c == '_' ||
           c == '.' || c == '+' || c == '-';
}

/* A bare token (true, false, null or a number) ended at buf[j]; ``nxt`` is whether buf[j]
 * exists (the error excerpt shows what follows the token). */
static int
finish_bare(Core *s, PyObject *buf, Py_ssize_t j, int nxt, Py_ssize_t base, PyObject *out)
{
    PyObject *token = take(s), *value = NULL;
    if (token == NULL)
        return -1;
    Py_ssize_t len = PyUnicode_GET_LENGTH(token);
    const char *problem = "invalid literal %R";
    if (PyUnicode_CompareWithASCIIString(token, "true") == 0)
        value = Py_NewRef(Py_True);
    else if (PyUnicode_CompareWithASCIIString(token, "false") == 0)
        value = Py_NewRef(Py_False);
    else if (PyUnicode_CompareWithASCIIString(token, "null") == 0)
        value = Py_NewRef(Py_None);
    else if (len > 0 &&
             number_end(PyUnicode_KIND(token), PyUnicode_DATA(token), 0, len) == len) {
        if ((value = number_value(token)) == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_ValueError)) {
                Py_DECREF(token);
                return -1;
            }
            PyErr_Clear();
            problem = "number too long";
        }
    }
    if (value == NULL) {
        PyObject *context = token;
        if (nxt) {
            Py_ssize_t n = PyUnicode_GET_LENGTH(buf);
            PyObject *after = PyUnicode_Substring(buf, j, j + EXCERPT < n ? j + EXCERPT : n);
            context = after ? PyUnicode_Concat(token, after) : NULL;
            Py_XDECREF(after);
        }
        if (context != NULL)
            fail(s, problem, token, NULL, base + j - len, context, len);
        if (context != token)
            Py_XDECREF(context);
        Py_DECREF(token);
        return -1;
    }
    Py_DECREF(token);
    return finish_value(s, value, out);
}

/* -- the state machine --------------------------------------------------------------------- */

static PyObject *
char_at(PyObject *buf, Py_ssize_t i)
{
    return PyUnicode_Substring(buf, i, i + 1);
}

static int
fail_char(Core *s, const char *message, PyObject *first, PyObject *buf, Py_ssize_t i,
          Py_ssize_t base)
{
    /* message has one %R for the character at buf[i] (after ``first`` when given) */
    PyObject *c = char_at(buf, i);
    if (c == NULL)
        return -1;
    if (first != NULL)
        fail(s, message, first, c, base + i, buf, i);
    else
        fail(s, message, c, NULL, base + i, buf, i);
    Py_DECREF(c);
    return -1;
}

/* Run from buf[i] to the end of buf. ``base`` is the position of buf[0] in the document. */
static int
run(Core *s, PyObject *buf, Py_ssize_t i, Py_ssize_t base, PyObject *out, int final)
{
    int kind = PyUnicode_KIND(buf);
    const void *data = PyUnicode_DATA(buf);
    Py_ssize_t n = PyUnicode_GET_LENGTH(buf);
    PyObject *value;
    while (i < n) {
        Py_UCS4 c = RD(i);
        switch (s->state) {
        case STR:
            i = string_step(s, buf, kind, data, i, n, base, out);
            if (i < 0)
                return -1;
            continue;
        case AFTER: {
            if (IS_WS(c)) {
                i++;
                continue;
            }
            Frame *top = &s->stack[s->depth - 1];
            if (c == ',') {
                i++;
                if (top->dictlike) {
                    s->state = KEY;
                    continue;
                }
                PyObject *index = PyLong_FromSsize_t(PyList_GET_SIZE(top->value));
                int r = index ? set_path(s, top->path, index) : -1;
                Py_XDECREF(index);
                if (r < 0)
                    return -1;
                s->state = VALUE;
                continue;
            }
            if (c != (Py_UCS4)(top->dictlike ? '}' : ']')) {
                PyObject *closer = PyUnicode_FromString(top->dictlike ? "}" : "]");
                if (closer != NULL) {
                    fail_char(s, "expected ',' or %R, got %R", closer, buf, i, base);
                    Py_DECREF(closer);
                }
                return -1;
            }
            i++;
            EventClass *end = top->dictlike ? &E_OEND : &E_AEND;
            value = pop(s);
            if (emit(s, out, end, s->path, NULL) < 0) {
                Py_DECREF(value);
                return -1;
            }
            if (finish_value(s, value, out) < 0)
                return -1;
            continue;
        }
        case VALUE:
            if (IS_WS(c)) {
                i++;
                continue;
            }
            if (c == '"') {
                if (emit(s, out, &E_START, s->path, NULL) < 0)
                    return -1;
                s->is_key = 0;
                s->state = STR;
                i++;
                continue;
            }
            if (c == '-' || IS_DIGIT(c)) {
                Py_ssize_t j = number_end(kind, data, i, n);
                if (j > i && j < n && is_delimiter(RD(j))) {
                    if (emit(s, out, &E_START, s->path, NULL) < 0)
                        return -1;
                    PyObject *token = PyUnicode_Substring(buf, i, j);
                    value = token ? number_value(token) : NULL;
                    Py_XDECREF(token);
                    if (value == NULL && PyErr_ExceptionMatches(PyExc_ValueError)) {
                        /* more digits than sys.get_int_max_str_digits() allows */
                        PyErr_Clear();
                        fail(s, "number too long", NULL, NULL, base + i, buf, i);
                    }
                    if (value == NULL || finish_value(s, value, out) < 0)
                        return -1;
                    i = j;
                    continue;
                }
            }
            if (c == '{' || c == '[') {
                int dictlike = c == '{';
                if (s->depth >= MAX_DEPTH) {
                    fail(s, "containers nested deeper than 1000 levels", NULL, NULL, base + i,
                         buf, i);
                    return -1;
                }
                if (emit(s, out, &E_START, s->path, NULL) < 0 ||
                    (dictlike ? emit(s, out, &E_OSTART, s->path, Py_None)
                              : emit(s, out, &E_ASTART, s->path, NULL)) < 0)
                    return -1;
                PyObject *container = dictlike ? PyDict_New() : PyList_New(0);
                if (container == NULL || push(s, dictlike, container) < 0)
                    return -1;
                i++;
                if (dictlike) {
                    s->state = KEY;
                    continue;
                }
                PyObject *zero = PyLong_FromLong(0);
                int r = zero ? set_path(s, s->path, zero) : -1;
                Py_XDECREF(zero);
                if (r < 0)
                    return -1;
                continue;
            }
            if (c == ']' && s->depth && !s->stack[s->depth - 1].dictlike) {
                /* an empty list or a trailing comma */
                i++;
                value = pop(s);
                if (emit(s, out, &E_AEND, s->path, NULL) < 0) {
                    Py_DECREF(value);
                    return -1;
                }
                if (finish_value(s, value, out) < 0)
                    return -1;
                continue;
            }
            if (Py_UNICODE_ISALNUM(c) || c == '-' || c == '+' || c == '.' || c == '_') {
                if (emit(s, out, &E_START, s->path, NULL) < 0 || clear_list(s->pieces) < 0)
                    return -1;
                s->is_key = 0;
                s->state = BARE;
                continue;
            }
            return fail_char(s, "unexpected character %R", NULL, buf, i, base);
        case KEY:
            if (IS_WS(c)) {
                i++;
                continue;
            }
            if (c == '}') {
                i++;
                value = pop(s);
                if (emit(s, out, &E_OEND, s->path, NULL) < 0) {
                    Py_DECREF(value);
                    return -1;
                }
                if (finish_value(s, value, out) < 0)
                    return -1;
                continue;
            }
            if (c == '"') {
                if (clear_list(s->pieces) < 0)
                    return -1;
                s->is_key = 1;
                s->state = STR;
                i++;
                continue;
            }
            return fail_char(s, "expected a key, got %R", NULL, buf, i, base);
        case SEP:
            if (IS_WS(c)) {
                i++;
                continue;
            }
            if (c == ':') {
                Frame *top = &s->stack[s->depth - 1];
                if (s->unwrap != PASS && s->depth == 1) {
                    /* a member of the root object: "result" is the new root */
                    int r = PyUnicode_Check(top->key) ? PyUnicode_Compare(top->key, RESULT) : 1;
                    if (r == -1 && PyErr_Occurred())
                        return -1;
                    s->in_result = r == 0;
                }
                if (s->unwrap != PASS && s->depth == 1 && s->in_result)
                    Py_SETREF(s->path, Py_NewRef(top->path)); /* () */
                else if (set_path(s, top->path, top->key) < 0)
                    return -1;
                s->state = VALUE;
                i++;
                continue;
            }
            return fail_char(s, "expected ':' after key, got %R", NULL, buf, i, base);
        case BARE: {
            Py_ssize_t j = i;
            while (j < n && is_bare(RD(j)))
                j++;
            if (j > i) {
                PyObject *piece = PyUnicode_Substring(buf, i, j);
                int r = piece ? PyList_Append(s->pieces, piece) : -1;
                Py_XDECREF(piece);
                if (r < 0)
                    return -1;
            }
            if (j == n && !final)
                return 0;
            if (finish_bare(s, buf, j, j < n, base, out) < 0)
                return -1;
            i = j;
            continue;
        }
        case FENCE_INFO: {
            Py_ssize_t j = PyUnicode_FindChar(buf, '\n', i, n, 1);
            if (j == -2)
                return -1;
            if (j < 0)
                return 0;
            s->state = VALUE;
            i = j + 1;
            continue;
        }
        case PRE: {
            /* the first code fence or opening bracket */
            Py_ssize_t j;
            for (j = i; j < n; j++) {
                Py_UCS4 d = RD(j);
                if (d == '{' || (d == '[' && !s->object_root))
                    break;
                if (d == '`' && j + 2 < n && RD(j + 1) == '`' && RD(j + 2) == '`')
                    break;
            }
            if (j == n) {
                /* hold back one or two trailing backticks: a fence may be cut */
                Py_ssize_t k = n;
                while (k > i && k > n - 2 && RD(k - 1) == '`')
                    k--;
                if (k < n && !final) {
                    PyObject *tail = PyUnicode_Substring(buf, k, n);
                    if (tail == NULL)
                        return -1;
                    Py_SETREF(s->tail, tail);
                }
                return 0;
            }
            if (RD(j) == '`') {
                s->state = FENCE_INFO;
                i = j + 3;
            }
            else {
                s->state = VALUE;
                i = j;
            }
            continue;
        }
        default: /* DONE: text after the document is ignored */
            return 0;
        }
    }
    return 0;
}

/* A parse error: attach the events the chunk produced before it, and raise it. Any other
 * exception (MemoryError) passes through as it is. */
static PyObject *
raise_with(Core *s, PyObject *out)
{
    if (s->error != NULL && !PyErr_Occurred()) {
        if (PyObject_SetAttrString(s->error, "events", out) == 0)
            PyErr_SetObject((PyObject *)Py_TYPE(s->error), s->error);
    }
    Py_DECREF(out);
    return NULL;
}

static PyObject *
Core_feed(Core *s, PyObject *chunk)
{
    if (!PyUnicode_Check(chunk))
        return PyErr_Format(PyExc_TypeError, "feed() takes a str, not %.100s",
                            Py_TYPE(chunk)->tp_name);
    if (s->error != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(s->error), s->error);
        return NULL;
    }
    Py_ssize_t m = PyUnicode_GET_LENGTH(chunk);
    if (s->state == DONE) {
        s->fed += m;
        return PyList_New(0);
    }
    if (s->state == STR && !s->is_key && PyUnicode_GET_LENGTH(s->tail) == 0 &&
        s->unwrap != UNDECIDED &&
        find_quote_or_backslash(PyUnicode_KIND(chunk), PyUnicode_DATA(chunk), 0, m) == m) {
        /* Inside a string value, plain text: the common case by far. */
        s->fed += m;
        if (m == 0)
            return PyList_New(0);
        if (add_piece(s, chunk) < 0)
            return NULL;
        if (!SHOWN(s)) /* decided: a string's field_start came before */
            return PyList_New(0);
        PyObject *ev = event(&E_DELTA, s->path, chunk), *out;
        if (ev == NULL)
            return NULL;
        if ((out = PyList_New(1)) == NULL) {
            Py_DECREF(ev);
            return NULL;
        }
        PyList_SET_ITEM(out, 0, ev);
        return out;
    }
    Py_ssize_t held = PyUnicode_GET_LENGTH(s->tail);
    PyObject *buf = held ? PyUnicode_Concat(s->tail, chunk) : Py_NewRef(chunk);
    PyObject *out = PyList_New(0);
    if (buf == NULL || out == NULL) {
        Py_XDECREF(buf);
        Py_XDECREF(out);
        return NULL;
    }
    Py_ssize_t base = s->fed - held;
    s->fed += m;
    Py_SETREF(s->tail, Py_NewRef(EMPTY));
    int r = run(s, buf, 0, base, out, 0);
    Py_DECREF(buf);
    return r < 0 ? raise_with(s, out) : out;
}

static PyObject *
Core_close(Core *s, PyObject *Py_UNUSED(ignored))
{
    if (s->error != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(s->error), s->error);
        return NULL;
    }
    PyObject *out = PyList_New(0), *tail = s->tail;
    if (out == NULL)
        return NULL;
    s->tail = Py_NewRef(EMPTY);
    Py_ssize_t held = PyUnicode_GET_LENGTH(tail), base = s->fed - held;
    const char *message = NULL;
    if (held && run(s, tail, 0, base, out, 1) < 0)
        goto error;
    if (s->state == BARE && finish_bare(s, tail, held, 0, base, out) < 0)
        goto error;
    switch (s->state) {
    case DONE: break;
    case PRE:
    case FENCE_INFO: message = "no JSON value found"; break;
    case STR: message = "unterminated string"; break;
    default: message = "unexpected end of input";
    }
    if (message != NULL) {
        fail(s, message, NULL, NULL, s->fed, tail, held);
        goto error;
    }
    Py_DECREF(tail);
    return out;
error:
    Py_DECREF(tail);
    return raise_with(s, out);
}

static PyObject *
Core_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"object_root", "unwrap_result", NULL};
    int object_root = 0, unwrap_result = 0;
    if (ParseError == NULL)
        return PyErr_Format(PyExc_RuntimeError, "_cjson.configure() was not called");
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|pp:JsonCore", names, &object_root,
                                     &unwrap_result))
        return NULL;
    Core *s = (Core *)type->tp_alloc(type, 0);
    if (s == NULL)
        return NULL;
    s->state = PRE;
    s->object_root = object_root;
    s->path = PyTuple_New(0);
    s->pieces = PyList_New(0);
    s->blocks = PyList_New(0);
    s->tail = Py_NewRef(EMPTY);
    s->unwrap = unwrap_result ? UNDECIDED : PASS;
    s->held = PyList_New(0);
    if (s->path == NULL || s->pieces == NULL || s->blocks == NULL || s->held == NULL) {
        Py_DECREF(s);
        return NULL;
    }
    return (PyObject *)s;
}

static int
Core_traverse(Core *s, visitproc visit, void *arg)
{
    for (Py_ssize_t k = 0; k < s->depth; k++) {
        Py_VISIT(s->stack[k].path);
        Py_VISIT(s->stack[k].value);
        Py_VISIT(s->stack[k].key);
    }
    Py_VISIT(s->path);
    Py_VISIT(s->pieces);
    Py_VISIT(s->blocks);
    Py_VISIT(s->tail);
    Py_VISIT(s->value);
    Py_VISIT(s->error);
    Py_VISIT(s->held);
    return 0;
}

static int
Core_clear(Core *s)
{
    while (s->depth) {
        Frame *f = &s->stack[--s->depth];
        Py_CLEAR(f->path);
        Py_CLEAR(f->value);
        Py_CLEAR(f->key);
    }
    Py_CLEAR(s->path);
    Py_CLEAR(s->pieces);
    Py_CLEAR(s->blocks);
    Py_CLEAR(s->tail);
    Py_CLEAR(s->value);
    Py_CLEAR(s->error);
    Py_CLEAR(s->held);
    return 0;
}

static void
Core_dealloc(Core *s)
{
    PyObject_GC_UnTrack(s);
    Core_clear(s);
    PyMem_Free(s->stack);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyObject *
Core_done(Core *s, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(s->state == DONE);
}

static PyObject *
Core_value(Core *s, void *Py_UNUSED(closure))
{
    return Py_NewRef(s->value ? s->value : Py_None);
}

static PyObject *
Core_error(Core *s, void *Py_UNUSED(closure))
{
    return Py_NewRef(s->error ? s->error : Py_None);
}

static PyMethodDef Core_methods[] = {
    {"feed", (PyCFunction)Core_feed, METH_O, "Consume one chunk; return the events it completes."},
    {"close", (PyCFunction)Core_close, METH_NOARGS, "End of input: finish or raise."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Core_getset[] = {
    {"done", (getter)Core_done, NULL, "The document is complete.", NULL},
    {"value", (getter)Core_value, NULL, "The complete document, or None.", NULL},
    {"error", (getter)Core_error, NULL, "The StreamParseError, or None.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject CoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "langfx_nb.structured._cjson.JsonCore",
    .tp_basicsize = sizeof(Core),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The JSON stream parser's state machine (see _stream_json for the reference).",
    .tp_new = Core_new,
    .tp_dealloc = (destructor)Core_dealloc,
    .tp_traverse = (traverseproc)Core_traverse,
    .tp_clear = (inquiry)Core_clear,
    .tp_methods = Core_methods,
    .tp_getset = Core_getset,
};

static PyMethodDef module_methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(StreamParseError, StringFieldDelta, FieldStart, FieldEnd, ObjectStart, "
     "ObjectEnd, ArrayStart, ArrayEnd): the classes the parser creates."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_cjson", "The compiled JSON grammar of the stream parser.", -1,
    module_methods,
};

PyMODINIT_FUNC
PyInit__cjson(void)
{
    if (PyType_Ready(&CoreType) < 0)
        return NULL;
    if (EMPTY == NULL && (EMPTY = PyUnicode_FromStringAndSize("", 0)) == NULL)
        return NULL;
    if (RESULT == NULL && (RESULT = PyUnicode_InternFromString("result")) == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "JsonCore", (PyObject *)&CoreType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
