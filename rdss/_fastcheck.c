/*
 * rdss._fastcheck: the classifier's compiled fast path.
 *
 * A small interpreter for the subset of JSON Schema the project's schemas use, run directly
 * over the objects orjson builds (dict, list, str, int, float, bool, None). It answers one
 * question: "is this instance certainly valid?". It is deliberately conservative: whatever it
 * cannot decide cheaply and exactly (an IPv6 address, an unusual URI or e-mail address, a
 * leap second, a float where an integer is expected) it reports as "not certainly valid", and
 * the caller asks the reference engine (jsonschema-rs) and, failing that, walks the stages.
 * It must therefore never accept what the reference engine rejects; the test suite checks
 * that property over generated and mutated messages.
 *
 * The program is compiled in Python (rdss/fastpath.py) from the schema files into a list of
 * node dicts; node 0 is the root. Nothing here knows about RDSS.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#include <string.h>

enum { T_NULL = 1, T_BOOLEAN = 2, T_INTEGER = 4, T_NUMBER = 8, T_STRING = 16, T_ARRAY = 32, T_OBJECT = 64 };

enum {
    C_NONE = 0, C_UUID, C_SEMVER, C_DATETIME, C_EMAIL, C_URI, C_HOSTNAME, C_IPV4, C_IPV6
};

#define MAX_DEPTH 200
#define PAIRWISE_LIMIT 16

/* One property of an object schema. Instance keys are matched by pointer first: orjson hands
   out the same str object for a key every time it parses it, so after the first message
   `alias` holds that object and a match costs one comparison instead of a dict lookup. */
typedef struct {
    PyObject *name;            /* the name as the schema spells it (strong ref) */
    PyObject *alias;           /* the last instance key object that matched it (strong ref) */
    Py_hash_t hash;
    int child;
    int required;
} Property;

typedef struct {
    int types;                 /* bitmask of allowed JSON types; 0 = any */
    Py_ssize_t n_properties;
    Property *properties;      /* in schema order */
    Py_ssize_t cursor;         /* after the last match: members usually come in schema order */
    Py_ssize_t n_required;     /* required names that are properties */
    PyObject *extra_required;  /* tuple of required names that are not properties, or NULL */
    int forbid_additional;     /* additionalProperties: false */
    int items;                 /* child index, or -1 */
    Py_ssize_t min_items;      /* -1 if absent */
    int unique_items;
    Py_ssize_t min_length;     /* -1 if absent */
    int check;                 /* C_* string check (pattern or format) */
    int has_minimum, has_maximum;
    long long minimum, maximum;
    PyObject *enum_values;     /* tuple, or NULL (const is an enum of one) */
    Py_ssize_t n_any_of;
    int *any_of;               /* child indexes */
    int if_node, then_node;    /* -1 if absent */
} Node;

typedef struct {
    PyObject_HEAD
    Py_ssize_t n_nodes;
    Node *nodes;
} Checker;

static int check_node(Checker *self, int index, PyObject *instance, int depth);

/* ---------------------------------------------------------------- JSON equality and hashing */

static int json_type(PyObject *o) {
    if (PyUnicode_CheckExact(o)) return T_STRING;
    if (PyDict_CheckExact(o)) return T_OBJECT;
    if (PyList_CheckExact(o)) return T_ARRAY;
    if (PyBool_Check(o)) return T_BOOLEAN;
    if (PyLong_CheckExact(o)) return T_INTEGER;
    if (PyFloat_CheckExact(o)) return T_NUMBER;
    if (o == Py_None) return T_NULL;
    return 0; /* not a JSON value as orjson builds them */
}

/* 1 equal, 0 different, -1 cannot tell (error or unexpected type) */
static int json_equal(PyObject *a, PyObject *b, int depth) {
    if (a == b) return 1;
    if (depth > MAX_DEPTH) return -1;
    int ta = json_type(a), tb = json_type(b);
    if (!ta || !tb) return -1;
    if ((ta | tb) == (T_INTEGER | T_NUMBER) || (ta == tb && (ta == T_INTEGER || ta == T_NUMBER))) {
        int r = PyObject_RichCompareBool(a, b, Py_EQ);
        if (r < 0) { PyErr_Clear(); return -1; }
        return r;
    }
    if (ta != tb) return 0;
    switch (ta) {
    case T_STRING: {
        int r = PyUnicode_Compare(a, b);
        if (r == -1 && PyErr_Occurred()) { PyErr_Clear(); return -1; }
        return r == 0;
    }
    case T_BOOLEAN:
    case T_NULL:
        return 0; /* identical objects were caught above */
    case T_ARRAY: {
        Py_ssize_t n = PyList_GET_SIZE(a);
        if (n != PyList_GET_SIZE(b)) return 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            int r = json_equal(PyList_GET_ITEM(a, i), PyList_GET_ITEM(b, i), depth + 1);
            if (r != 1) return r;
        }
        return 1;
    }
    case T_OBJECT: {
        if (PyDict_GET_SIZE(a) != PyDict_GET_SIZE(b)) return 0;
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (PyDict_Next(a, &pos, &key, &value)) {
            PyObject *other = PyDict_GetItemWithError(b, key);
            if (other == NULL) {
                if (PyErr_Occurred()) { PyErr_Clear(); return -1; }
                return 0;
            }
            int r = json_equal(value, other, depth + 1);
            if (r != 1) return r;
        }
        return 1;
    }
    }
    return -1;
}

/* A hash consistent with json_equal; 0 with *ok = 0 when it cannot be computed. */
static Py_hash_t json_hash(PyObject *o, int depth, int *ok) {
    if (depth > MAX_DEPTH) { *ok = 0; return 0; }
    switch (json_type(o)) {
    case T_STRING:
    case T_INTEGER:
    case T_NUMBER: { /* Python's numeric hash already makes 1 and 1.0 collide */
        Py_hash_t h = PyObject_Hash(o);
        if (h == -1) { PyErr_Clear(); *ok = 0; return 0; }
        return h;
    }
    case T_BOOLEAN: return o == Py_True ? 0x51ED27 : 0x51ED28;
    case T_NULL: return 0x7E11;
    case T_ARRAY: {
        Py_uhash_t h = 0x345678UL;
        Py_ssize_t n = PyList_GET_SIZE(o);
        for (Py_ssize_t i = 0; i < n; i++) {
            h = (h ^ (Py_uhash_t)json_hash(PyList_GET_ITEM(o, i), depth + 1, ok)) * 1000003UL;
            if (!*ok) return 0;
        }
        return (Py_hash_t)(h + (Py_uhash_t)n);
    }
    case T_OBJECT: { /* order-independent: members are a set */
        Py_uhash_t h = 0x27D4EB2FUL;
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (PyDict_Next(o, &pos, &key, &value)) {
            Py_uhash_t k = (Py_uhash_t)json_hash(key, depth + 1, ok);
            Py_uhash_t v = (Py_uhash_t)json_hash(value, depth + 1, ok);
            if (!*ok) return 0;
            h += (k * 0x9E3779B97F4A7C15ULL) ^ (v + 0x7F4A7C15UL + (k << 6) + (k >> 2));
        }
        return (Py_hash_t)h;
    }
    }
    *ok = 0;
    return 0;
}

typedef struct { Py_hash_t hash; Py_ssize_t index; } HashedItem;

static int compare_hashed(const void *x, const void *y) {
    Py_hash_t a = ((const HashedItem *)x)->hash, b = ((const HashedItem *)y)->hash;
    return (a > b) - (a < b);
}

/* 1 unique, 0 duplicate (or cannot tell) */
static int items_unique(PyObject *list) {
    Py_ssize_t n = PyList_GET_SIZE(list);
    if (n < 2) return 1;
    if (n <= PAIRWISE_LIMIT) {
        for (Py_ssize_t i = 0; i < n; i++)
            for (Py_ssize_t j = i + 1; j < n; j++)
                if (json_equal(PyList_GET_ITEM(list, i), PyList_GET_ITEM(list, j), 0) != 0) return 0;
        return 1;
    }
    HashedItem *hashed = PyMem_Malloc(sizeof(HashedItem) * (size_t)n);
    if (hashed == NULL) { PyErr_Clear(); return 0; }
    int ok = 1, result = 1;
    for (Py_ssize_t i = 0; i < n && ok; i++) {
        hashed[i].hash = json_hash(PyList_GET_ITEM(list, i), 0, &ok);
        hashed[i].index = i;
    }
    if (!ok) { PyMem_Free(hashed); return 0; }
    qsort(hashed, (size_t)n, sizeof(HashedItem), compare_hashed);
    for (Py_ssize_t i = 0; i < n && result; i++) {
        for (Py_ssize_t j = i + 1; j < n && hashed[j].hash == hashed[i].hash; j++) {
            if (json_equal(PyList_GET_ITEM(list, hashed[i].index), PyList_GET_ITEM(list, hashed[j].index), 0) != 0) {
                result = 0;
                break;
            }
        }
    }
    PyMem_Free(hashed);
    return result;
}

/* ---------------------------------------------------------------- string checks (ASCII only) */

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_hex_lower(char c) { return is_digit(c) || (c >= 'a' && c <= 'f'); }
static int is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
static int is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static int is_alnum(char c) { return is_alpha(c) || is_digit(c); }

/* ^[0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$ */
static int check_uuid(const char *s, Py_ssize_t n) {
    if (n != 36) return 0;
    for (Py_ssize_t i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-') return 0;
        } else if (!is_hex_lower(s[i])) {
            return 0;
        }
    }
    if (s[14] < '1' || s[14] > '5') return 0;
    return s[19] == '8' || s[19] == '9' || s[19] == 'a' || s[19] == 'b';
}

/* numeric identifier: 0 or [1-9][0-9]*; returns the length consumed, 0 if none */
static Py_ssize_t semver_number(const char *s, Py_ssize_t n) {
    if (n == 0 || !is_digit(s[0])) return 0;
    if (s[0] == '0') return 1;
    Py_ssize_t i = 1;
    while (i < n && is_digit(s[i])) i++;
    return i;
}

/* dot-separated identifiers of [0-9A-Za-z-]+; the length consumed (0 if none) */
static Py_ssize_t semver_identifiers(const char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    for (;;) {
        Py_ssize_t start = i;
        while (i < n && (is_alnum(s[i]) || s[i] == '-')) i++;
        if (i == start) return 0;
        if (i < n && s[i] == '.') { i++; continue; }
        return i;
    }
}

/* the semVer pattern of types.json */
static int check_semver(const char *s, Py_ssize_t n) {
    Py_ssize_t i = 0, k;
    for (int part = 0; part < 3; part++) {
        k = semver_number(s + i, n - i);
        if (!k) return 0;
        i += k;
        if (part < 2) {
            if (i >= n || s[i] != '.') return 0;
            i++;
        }
    }
    if (i < n && s[i] == '-') {
        k = semver_identifiers(s + i + 1, n - i - 1);
        if (!k) return 0;
        i += 1 + k;
    }
    if (i < n && s[i] == '+') {
        k = semver_identifiers(s + i + 1, n - i - 1);
        if (!k) return 0;
        i += 1 + k;
    }
    return i == n;
}

static int two_digits(const char *s) { return (s[0] - '0') * 10 + (s[1] - '0'); }

static int days_in_month(int year, int month) {
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (month == 2 && ((year % 4 == 0 && year % 100 != 0) || year % 400 == 0)) return 29;
    return days[month - 1];
}

/* RFC 3339 date-time; a leap second (:60) is left to the reference engine */
static int check_datetime(const char *s, Py_ssize_t n) {
    if (n < 20) return 0;
    static const char shape[] = "dddd-dd-ddTdd:dd:dd";
    for (int i = 0; i < 19; i++) {
        if (shape[i] == 'd') { if (!is_digit(s[i])) return 0; }
        else if (shape[i] == 'T') { if (s[i] != 'T' && s[i] != 't') return 0; }
        else if (s[i] != shape[i]) return 0;
    }
    int year = two_digits(s) * 100 + two_digits(s + 2), month = two_digits(s + 5), day = two_digits(s + 8);
    if (month < 1 || month > 12 || day < 1 || day > days_in_month(year, month)) return 0;
    if (two_digits(s + 11) > 23 || two_digits(s + 14) > 59 || two_digits(s + 17) > 59) return 0;
    Py_ssize_t i = 19;
    if (s[i] == '.') {
        Py_ssize_t start = ++i;
        while (i < n && is_digit(s[i])) i++;
        if (i == start) return 0;
    }
    if (i >= n) return 0;
    if (s[i] == 'Z' || s[i] == 'z') return i + 1 == n;
    if (s[i] != '+' && s[i] != '-') return 0;
    if (n - i != 6 || !is_digit(s[i + 1]) || !is_digit(s[i + 2]) || s[i + 3] != ':' || !is_digit(s[i + 4]) ||
        !is_digit(s[i + 5]))
        return 0;
    return two_digits(s + i + 1) <= 23 && two_digits(s + i + 4) <= 59;
}

/* RFC 1123 host name: labels of letters, digits and hyphens, 1-63 long, no edge or double
   hyphens; the last label must start with a letter (so it cannot be mistaken for an address) */
static int check_hostname(const char *s, Py_ssize_t n) {
    if (n < 1 || n > 253) return 0;
    Py_ssize_t start = 0, last_start = 0;
    for (Py_ssize_t i = 0; i <= n; i++) {
        if (i == n || s[i] == '.') {
            Py_ssize_t len = i - start;
            if (len < 1 || len > 63 || s[start] == '-' || s[i - 1] == '-') return 0;
            last_start = start;
            start = i + 1;
        } else if (!is_alnum(s[i]) && s[i] != '-') {
            return 0;
        } else if (s[i] == '-' && i > start && s[i - 1] == '-') {
            return 0; /* "--" marks IDNA A-labels (xn--...): left to the reference engine */
        }
    }
    return is_alpha(s[last_start]);
}

/* dotted quad, no leading zeros */
static int check_ipv4(const char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    for (int part = 0; part < 4; part++) {
        Py_ssize_t start = i;
        int value = 0;
        while (i < n && is_digit(s[i]) && i - start < 3) value = value * 10 + (s[i++] - '0');
        if (i == start || value > 255 || (i - start > 1 && s[start] == '0')) return 0;
        if (part < 3) {
            if (i >= n || s[i] != '.') return 0;
            i++;
        }
    }
    return i == n;
}

static int is_atext(char c) { return is_alnum(c) || (c && strchr("!#$%&'*+/=?^_`{|}~-", c) != NULL); }

/* a common-form address: dot-atom local part @ host name */
static int check_email(const char *s, Py_ssize_t n) {
    const char *at = memchr(s, '@', (size_t)n);
    if (at == NULL) return 0;
    Py_ssize_t local = at - s;
    if (local < 1 || local > 64 || s[0] == '.' || s[local - 1] == '.') return 0;
    for (Py_ssize_t i = 0; i < local; i++) {
        if (s[i] == '.') { if (s[i + 1] == '.') return 0; }
        else if (!is_atext(s[i])) return 0;
    }
    return check_hostname(at + 1, n - local - 1) && memchr(at + 1, '.', (size_t)(n - local - 1)) != NULL;
}

static int is_unreserved(char c) { return is_alnum(c) || c == '-' || c == '.' || c == '_' || c == '~'; }
static int is_sub_delim(char c) { return c && strchr("!$&'()*+,;=", c) != NULL; }

/* characters allowed in a run, with %HH escapes; `extra` lists more allowed characters */
static Py_ssize_t uri_run(const char *s, Py_ssize_t n, const char *extra) {
    Py_ssize_t i = 0;
    while (i < n) {
        char c = s[i];
        if (c == '%') {
            if (i + 2 >= n || !is_hex(s[i + 1]) || !is_hex(s[i + 2])) return -1;
            i += 3;
        } else if (is_unreserved(c) || is_sub_delim(c) || (c && strchr(extra, c) != NULL)) {
            i++;
        } else {
            break;
        }
    }
    return i;
}

/* an absolute URI with a registered-name host (no IP literal): scheme ":" ["//" authority] path
   ["?" query] ["#" fragment] */
static int check_uri(const char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    if (n < 2 || !is_alpha(s[0])) return 0;
    while (i < n && (is_alnum(s[i]) || s[i] == '+' || s[i] == '-' || s[i] == '.')) i++;
    if (i >= n || s[i] != ':') return 0;
    i++;
    if (n - i >= 2 && s[i] == '/' && s[i + 1] == '/') {
        i += 2;
        Py_ssize_t k = uri_run(s + i, n - i, ":@");
        if (k < 0) return 0;
        const char *authority = s + i;
        const char *at = NULL;
        for (Py_ssize_t j = 0; j < k; j++) {
            if (authority[j] != '@') continue;
            if (at) return 0; /* userinfo cannot hold an "@" */
            at = authority + j;
        }
        const char *host = at ? at + 1 : authority;
        Py_ssize_t host_len = k - (host - authority);
        const char *colon = memchr(host, ':', (size_t)host_len);
        if (colon) {
            for (const char *p = colon + 1; p < host + host_len; p++) if (!is_digit(*p)) return 0;
            host_len = colon - host;
        }
        i += k;
    }
    Py_ssize_t k = uri_run(s + i, n - i, ":@/");
    if (k < 0) return 0;
    i += k;
    if (i < n && s[i] == '?') {
        k = uri_run(s + i + 1, n - i - 1, ":@/?");
        if (k < 0) return 0;
        i += 1 + k;
    }
    if (i < n && s[i] == '#') {
        k = uri_run(s + i + 1, n - i - 1, ":@/?");
        if (k < 0) return 0;
        i += 1 + k;
    }
    return i == n;
}

static int check_string(int check, PyObject *instance) {
    if (check == C_NONE) return 1;
    if (check == C_IPV6) return 0; /* left to the reference engine */
    if (!PyUnicode_IS_ASCII(instance)) return 0;
    const char *s = (const char *)PyUnicode_DATA(instance);
    Py_ssize_t n = PyUnicode_GET_LENGTH(instance);
    switch (check) {
    case C_UUID: return check_uuid(s, n);
    case C_SEMVER: return check_semver(s, n);
    case C_DATETIME: return check_datetime(s, n);
    case C_EMAIL: return check_email(s, n);
    case C_URI: return check_uri(s, n);
    case C_HOSTNAME: return check_hostname(s, n);
    case C_IPV4: return check_ipv4(s, n);
    }
    return 0;
}

/* ---------------------------------------------------------------- the interpreter */

static int in_enum(PyObject *values, PyObject *instance) {
    Py_ssize_t n = PyTuple_GET_SIZE(values);
    for (Py_ssize_t i = 0; i < n; i++)
        if (json_equal(PyTuple_GET_ITEM(values, i), instance, 0) == 1) return 1;
    return 0;
}

static int check_integer_bounds(const Node *node, PyObject *instance) {
    if (!node->has_minimum && !node->has_maximum) return 1;
    int overflow = 0;
    long long value = PyLong_AsLongLongAndOverflow(instance, &overflow);
    if (overflow || (value == -1 && PyErr_Occurred())) { PyErr_Clear(); return 0; }
    if (node->has_minimum && value < node->minimum) return 0;
    if (node->has_maximum && value > node->maximum) return 0;
    return 1;
}

static Property *find_property(Node *node, PyObject *key) {
    Py_ssize_t n = node->n_properties;
    if (n == 0) return NULL;
    Py_ssize_t start = node->cursor;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t i = start + k;
        if (i >= n) i -= n;
        if (node->properties[i].alias == key || node->properties[i].name == key) {
            node->cursor = i + 1 < n ? i + 1 : 0;
            return &node->properties[i];
        }
    }
    if (!PyUnicode_CheckExact(key)) return NULL;
    Py_hash_t hash = PyObject_Hash(key);
    if (hash == -1) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        Property *prop = &node->properties[i];
        if (prop->hash != hash) continue;
        int equal = PyUnicode_Compare(prop->name, key);
        if (equal == -1 && PyErr_Occurred()) return NULL;
        if (equal == 0) {
            Py_INCREF(key);
            Py_XSETREF(prop->alias, key);
            node->cursor = i + 1 < n ? i + 1 : 0;
            return prop;
        }
    }
    return NULL;
}

static int check_node(Checker *self, int index, PyObject *instance, int depth) {
    if (depth > MAX_DEPTH) return 0;
    Node *node = &self->nodes[index];
    int type = json_type(instance);
    if (!type) return 0;
    if (node->types) {
        int allowed = node->types;
        if (allowed & T_NUMBER) allowed |= T_INTEGER;
        if (!(allowed & type)) return 0;
    }
    switch (type) {
    case T_OBJECT: {
        Py_ssize_t pos = 0, found_required = 0;
        PyObject *key, *value;
        while (PyDict_Next(instance, &pos, &key, &value)) {
            Property *prop = find_property(node, key);
            if (prop == NULL) {
                if (PyErr_Occurred()) { PyErr_Clear(); return 0; }
                if (node->forbid_additional) return 0;
                continue;
            }
            found_required += prop->required;
            if (!check_node(self, prop->child, value, depth + 1)) return 0;
        }
        /* dict keys are unique, so counting matched required names proves they are all there */
        if (found_required != node->n_required) return 0;
        if (node->extra_required) {
            Py_ssize_t n = PyTuple_GET_SIZE(node->extra_required);
            for (Py_ssize_t i = 0; i < n; i++) {
                int has = PyDict_Contains(instance, PyTuple_GET_ITEM(node->extra_required, i));
                if (has != 1) { PyErr_Clear(); return 0; }
            }
        }
        break;
    }
    case T_ARRAY: {
        Py_ssize_t n = PyList_GET_SIZE(instance);
        if (node->min_items >= 0 && n < node->min_items) return 0;
        if (node->items >= 0)
            for (Py_ssize_t i = 0; i < n; i++)
                if (!check_node(self, node->items, PyList_GET_ITEM(instance, i), depth + 1)) return 0;
        if (node->unique_items && !items_unique(instance)) return 0;
        break;
    }
    case T_STRING:
        if (node->min_length >= 0 && PyUnicode_GET_LENGTH(instance) < node->min_length) return 0;
        if (!check_string(node->check, instance)) return 0;
        break;
    case T_INTEGER:
        if (!check_integer_bounds(node, instance)) return 0;
        break;
    case T_NUMBER:
        /* a float where the schema bounds integers, or expects one: let the reference decide */
        if (node->has_minimum || node->has_maximum || (node->types & T_INTEGER)) return 0;
        break;
    default:
        break;
    }
    if (node->enum_values && !in_enum(node->enum_values, instance)) return 0;
    if (node->n_any_of) {
        int any = 0;
        for (Py_ssize_t i = 0; i < node->n_any_of && !any; i++) any = check_node(self, node->any_of[i], instance, depth + 1);
        if (!any) return 0;
    }
    if (node->if_node >= 0 && node->then_node >= 0) {
        /* The compiler admits only "if" schemas the fast path decides exactly (const, enum,
           required, types), so a failed "if" really is false and "then" does not apply. */
        if (check_node(self, node->if_node, instance, depth + 1) &&
            !check_node(self, node->then_node, instance, depth + 1))
            return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------- compiling the program */

static int get_int(PyObject *dict, const char *key, long long *out) {
    PyObject *v = PyDict_GetItemString(dict, key);
    if (v == NULL) return 0;
    long long value = PyLong_AsLongLong(v);
    if (value == -1 && PyErr_Occurred()) return -1;
    *out = value;
    return 1;
}

static int load_node(Checker *self, Py_ssize_t index, PyObject *spec) {
    Node *node = &self->nodes[index];
    long long value;
    int r;
    node->items = node->if_node = node->then_node = -1;
    node->min_items = node->min_length = -1;
    if (!PyDict_Check(spec)) { PyErr_SetString(PyExc_TypeError, "each node must be a dict"); return -1; }
    if ((r = get_int(spec, "types", &value)) < 0) return -1;
    if (r) node->types = (int)value;
    if ((r = get_int(spec, "check", &value)) < 0) return -1;
    if (r) node->check = (int)value;
    if ((r = get_int(spec, "items", &value)) < 0) return -1;
    if (r) node->items = (int)value;
    if ((r = get_int(spec, "minItems", &value)) < 0) return -1;
    if (r) node->min_items = (Py_ssize_t)value;
    if ((r = get_int(spec, "minLength", &value)) < 0) return -1;
    if (r) node->min_length = (Py_ssize_t)value;
    if ((r = get_int(spec, "minimum", &value)) < 0) return -1;
    if (r) { node->has_minimum = 1; node->minimum = value; }
    if ((r = get_int(spec, "maximum", &value)) < 0) return -1;
    if (r) { node->has_maximum = 1; node->maximum = value; }
    if ((r = get_int(spec, "if", &value)) < 0) return -1;
    if (r) node->if_node = (int)value;
    if ((r = get_int(spec, "then", &value)) < 0) return -1;
    if (r) node->then_node = (int)value;
    PyObject *flag = PyDict_GetItemString(spec, "uniqueItems");
    node->unique_items = flag != NULL && PyObject_IsTrue(flag) == 1;
    flag = PyDict_GetItemString(spec, "forbidAdditional");
    node->forbid_additional = flag != NULL && PyObject_IsTrue(flag) == 1;
    PyObject *required = PyDict_GetItemString(spec, "required");
    PyObject *required_set = PySet_New(required); /* PySet_New(NULL) is an empty set */
    if (!required_set) return -1;
    PyObject *props = PyDict_GetItemString(spec, "properties");
    if (props) {
        if (!PyDict_Check(props)) {
            Py_DECREF(required_set);
            PyErr_SetString(PyExc_TypeError, "properties must be a dict");
            return -1;
        }
        node->n_properties = PyDict_GET_SIZE(props);
        node->properties = PyMem_Calloc((size_t)(node->n_properties ? node->n_properties : 1), sizeof(Property));
        if (!node->properties) { Py_DECREF(required_set); PyErr_NoMemory(); return -1; }
        Py_ssize_t pos = 0, i = 0;
        PyObject *name, *child;
        while (PyDict_Next(props, &pos, &name, &child)) {
            long c = PyLong_AsLong(child);
            if (!PyUnicode_CheckExact(name) || c < 0 || c >= self->n_nodes) {
                Py_DECREF(required_set);
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "properties must map names to node indexes");
                return -1;
            }
            Property *prop = &node->properties[i++];
            Py_INCREF(name);
            prop->name = name;
            prop->hash = PyObject_Hash(name);
            prop->child = (int)c;
            prop->required = PySet_Contains(required_set, name) == 1;
            if (prop->required) {
                node->n_required++;
                if (PySet_Discard(required_set, name) < 0) { Py_DECREF(required_set); return -1; }
            }
        }
    }
    if (PySet_GET_SIZE(required_set) > 0) {
        node->extra_required = PySequence_Tuple(required_set);
        if (!node->extra_required) { Py_DECREF(required_set); return -1; }
    }
    Py_DECREF(required_set);
    PyObject *values = PyDict_GetItemString(spec, "enum");
    if (values) {
        node->enum_values = PySequence_Tuple(values);
        if (!node->enum_values) return -1;
    }
    PyObject *any_of = PyDict_GetItemString(spec, "anyOf");
    if (any_of) {
        PyObject *seq = PySequence_Tuple(any_of);
        if (!seq) return -1;
        node->n_any_of = PyTuple_GET_SIZE(seq);
        node->any_of = PyMem_Malloc(sizeof(int) * (size_t)(node->n_any_of ? node->n_any_of : 1));
        for (Py_ssize_t i = 0; i < node->n_any_of; i++) node->any_of[i] = (int)PyLong_AsLong(PyTuple_GET_ITEM(seq, i));
        Py_DECREF(seq);
        if (PyErr_Occurred()) return -1;
    }
    /* every child index must name a node */
    int children[] = {node->items, node->if_node, node->then_node};
    for (int i = 0; i < 3; i++)
        if (children[i] >= self->n_nodes) { PyErr_SetString(PyExc_ValueError, "child index out of range"); return -1; }
    for (Py_ssize_t i = 0; i < node->n_any_of; i++)
        if (node->any_of[i] < 0 || node->any_of[i] >= self->n_nodes) {
            PyErr_SetString(PyExc_ValueError, "anyOf index out of range");
            return -1;
        }
    return 0;
}

static void Checker_dealloc(Checker *self) {
    for (Py_ssize_t i = 0; i < self->n_nodes && self->nodes; i++) {
        Node *node = &self->nodes[i];
        for (Py_ssize_t j = 0; j < node->n_properties; j++) {
            Py_XDECREF(node->properties[j].name);
            Py_XDECREF(node->properties[j].alias);
        }
        PyMem_Free(node->properties);
        Py_XDECREF(node->extra_required);
        Py_XDECREF(node->enum_values);
        PyMem_Free(node->any_of);
    }
    PyMem_Free(self->nodes);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Checker_init(Checker *self, PyObject *args, PyObject *kwargs) {
    PyObject *program;
    static char *keywords[] = {"program", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:Checker", keywords, &program)) return -1;
    PyObject *seq = PySequence_Fast(program, "program must be a sequence of node dicts");
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n < 1) { Py_DECREF(seq); PyErr_SetString(PyExc_ValueError, "empty program"); return -1; }
    self->nodes = PyMem_Calloc((size_t)n, sizeof(Node));
    if (!self->nodes) { Py_DECREF(seq); PyErr_NoMemory(); return -1; }
    self->n_nodes = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (load_node(self, i, PySequence_Fast_GET_ITEM(seq, i)) < 0) { Py_DECREF(seq); return -1; }
    }
    Py_DECREF(seq);
    return 0;
}

static PyObject *Checker_is_valid(Checker *self, PyObject *instance) {
    int result = check_node(self, 0, instance, 0);
    if (PyErr_Occurred()) PyErr_Clear();
    return PyBool_FromLong(result);
}

static PyObject *fastcheck_check_string(PyObject *module, PyObject *args) {
    int check;
    PyObject *text;
    if (!PyArg_ParseTuple(args, "iU:check_string", &check, &text)) return NULL;
    return PyBool_FromLong(check_string(check, text));
}

static PyMethodDef Checker_methods[] = {
    {"is_valid", (PyCFunction)Checker_is_valid, METH_O, "True when the instance is certainly valid."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject CheckerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rdss._fastcheck.Checker",
    .tp_doc = "A compiled schema program; is_valid(instance) answers 'certainly valid?'.",
    .tp_basicsize = sizeof(Checker),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Checker_init,
    .tp_dealloc = (destructor)Checker_dealloc,
    .tp_methods = Checker_methods,
};

static PyMethodDef module_methods[] = {
    {"check_string", fastcheck_check_string, METH_VARARGS, "Apply one string check (C_* code) to a str."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef fastcheck_module = {
    PyModuleDef_HEAD_INIT, "rdss._fastcheck", "The classifier's compiled, conservative fast path.", -1, module_methods,
};

PyMODINIT_FUNC PyInit__fastcheck(void) {
    if (PyType_Ready(&CheckerType) < 0) return NULL;
    PyObject *module = PyModule_Create(&fastcheck_module);
    if (!module) return NULL;
    Py_INCREF(&CheckerType);
    if (PyModule_AddObject(module, "Checker", (PyObject *)&CheckerType) < 0) {
        Py_DECREF(&CheckerType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
