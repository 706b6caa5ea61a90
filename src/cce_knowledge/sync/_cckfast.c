/*
 * Optional native accelerator for canonical `.cck` artifacts (see accelerator.py).
 *
 * render(data, lo, hi, bits_text) takes whole LF-terminated `.cck` chunk lines in
 * data[lo:hi] and returns (line count, store chunk texts joined by ",\n"), or None as
 * soon as a line is not canonical -- a line the strict Python decoder (cck.py) accepts
 * and re-serialises to itself -- so the strict path keeps deciding every error; it is
 * tested byte for byte against that decoder. tokens() is the same scan for the shrink
 * guard; export() is the reverse (store file -> .cck lines), a drop-in for
 * cck._fast_export_range.
 *
 * Float text: non-zero components are looked up in a shared cache keyed by their bit
 * pattern (hash-embedder values repeat heavily: 100k records have 5.9M non-zero
 * components, 40k distinct); a miss is formatted here (serde_text) or, for the few
 * values this code does not decide, by `bits_text(bits) -> bytes`, the Python renderer.
 *
 * The GIL is released while scanning, so ranges render in parallel on threads; it is
 * re-taken only to call bits_text or to grow the output. Cache inserts take a spinlock
 * (one writer at a time); lock-free readers see an entry only after its text is
 * complete (release/acquire on the key).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef const unsigned char *cp;

/* ------------------------------------------------------------------ float-text cache */

#define CACHE_BITS 18
#define CACHE_SIZE (1u << CACHE_BITS)
#define CACHE_MAX_FILL (CACHE_SIZE / 2)
#define TEXT_MAX 31

/* Slots stay small (16 bytes) so the probed table stays in the CPU caches; texts
 * live in an append-only arena. */
typedef struct {
    uint64_t key; /* 0 = empty (zero is never cached: it is always "0.0") */
    uint32_t off; /* into arena */
    uint32_t len;
} entry;

static entry *cache;      /* calloc'd on first use, lives for the process */
static char *arena;       /* CACHE_MAX_FILL * TEXT_MAX bytes */
static size_t cache_fill; /* mutated under the GIL only */

static int cache_init(void) {
    if (cache) return 0;
    arena = malloc((size_t)CACHE_MAX_FILL * TEXT_MAX);
    cache = arena ? calloc(CACHE_SIZE, sizeof(entry)) : NULL;
    if (!cache) {
        free(arena);
        arena = NULL;
        return -1;
    }
    return 0;
}

static inline uint32_t slot_of(uint64_t k) {
    return (uint32_t)((k * 0x9E3779B97F4A7C15ull) >> (64 - CACHE_BITS));
}

/* Lock-free lookup; returns NULL on a miss. */
static const entry *cache_get(uint64_t k) {
    uint32_t i = slot_of(k);
    for (;;) {
        uint64_t got = __atomic_load_n(&cache[i].key, __ATOMIC_ACQUIRE);
        if (got == k) return &cache[i];
        if (got == 0) return NULL;
        i = (i + 1) & (CACHE_SIZE - 1);
    }
}

static char cache_lock; /* writers only; readers are lock-free */
static void cache_put_locked(uint64_t k, const char *text, size_t len);

static void cache_put(uint64_t k, const char *text, size_t len) {
    if (len > TEXT_MAX) return;
    while (__atomic_test_and_set(&cache_lock, __ATOMIC_ACQUIRE)) {
    }
    cache_put_locked(k, text, len);
    __atomic_clear(&cache_lock, __ATOMIC_RELEASE);
}

static void cache_put_locked(uint64_t k, const char *text, size_t len) {
    if (cache_fill >= CACHE_MAX_FILL) return;
    uint32_t i = slot_of(k);
    for (;;) {
        uint64_t got = __atomic_load_n(&cache[i].key, __ATOMIC_ACQUIRE);
        if (got == k) return;
        if (got == 0) break;
        i = (i + 1) & (CACHE_SIZE - 1);
    }
    uint32_t off = (uint32_t)(cache_fill * TEXT_MAX);
    memcpy(arena + off, text, len);
    cache[i].off = off;
    cache[i].len = (uint32_t)len;
    __atomic_store_n(&cache[i].key, k, __ATOMIC_RELEASE);
    cache_fill++;
}

/* ------------------------------------------------------------------ output buffer */

typedef struct {
    PyObject *bytes; /* the result under construction (refcount 1, private) */
    char *buf;
    size_t len, cap;
    PyThreadState *ts; /* non-NULL while the GIL is released */
    int failed;        /* a Python exception is set */
} out_t;

static int out_grow(out_t *o, size_t need) {
    size_t cap = o->cap + o->cap / 2 + need + 4096;
    PyEval_RestoreThread(o->ts);
    int rc = _PyBytes_Resize(&o->bytes, (Py_ssize_t)cap);
    o->ts = PyEval_SaveThread();
    if (rc < 0) {
        o->bytes = NULL;
        o->failed = 1;
        return -1;
    }
    o->buf = PyBytes_AS_STRING(o->bytes);
    o->cap = cap;
    return 0;
}

static inline int out_put(out_t *o, const void *p, size_t n) {
    if (o->len + n > o->cap && out_grow(o, n) < 0) return -1;
    memcpy(o->buf + o->len, p, n);
    o->len += n;
    return 0;
}

#define PUT_LIT(o, s) out_put((o), (s), sizeof(s) - 1)

/* ------------------------------------------------------------------ token scanners */

#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull
/* High bit set in each byte of x that is zero (exact when no byte of x is >= 0x80
 * below the first zero; callers also test v's own high bits). */
#define HAS_ZERO(x) (((x) - ONES) & ~(x))

/* A string token exactly as serde_json writes it: raw UTF-8 except '"', '\' and C0
 * controls; the short escapes \" \\ \b \f \n \r \t; \u00xx (lowercase) only for the
 * other controls. Returns the end (after the closing quote) or NULL. */
static cp scan_str(cp p, cp end) {
    if (p >= end || *p != '"') return NULL;
    p++;
    while (p < end) {
        /* Skip eight plain bytes at a time: none of '"', '\\', C0 controls, >= 0x80. */
        while (end - p >= 8) {
            uint64_t v;
            memcpy(&v, p, 8);
            uint64_t special = (HAS_ZERO(v ^ (ONES * '"')) | HAS_ZERO(v ^ (ONES * '\\')) |
                                (v - ONES * 0x20) | v) &
                               HIGHS;
            if (special) break;
            p += 8;
        }
        if (p >= end) break;
        unsigned c = *p;
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            p++;
            continue;
        }
        if (c == '"') return p + 1;
        if (c < 0x20) return NULL;
        if (c == '\\') {
            if (p + 1 >= end) return NULL;
            unsigned e = p[1];
            if (e == '"' || e == '\\' || e == 'b' || e == 'f' || e == 'n' || e == 'r' ||
                e == 't') {
                p += 2;
                continue;
            }
            if (e != 'u' || p + 6 > end || p[2] != '0' || p[3] != '0') return NULL;
            unsigned h = p[4], l = p[5];
            if (h == '0') {
                if (!((l >= '0' && l <= '7') || l == 'b' || l == 'e' || l == 'f')) return NULL;
            } else if (h == '1') {
                if (!((l >= '0' && l <= '9') || (l >= 'a' && l <= 'f'))) return NULL;
            } else {
                return NULL;
            }
            p += 6;
            continue;
        }
        /* Non-ASCII: one well-formed UTF-8 sequence (Unicode Table 3-7). */
        size_t need;
        unsigned lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) {
            need = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        } else {
            return NULL;
        }
        if (p + need >= end) return NULL;
        if (p[1] < lo || p[1] > hi) return NULL;
        for (size_t k = 2; k <= need; k++)
            if (p[k] < 0x80 || p[k] > 0xBF) return NULL;
        p += need + 1;
    }
    return NULL;
}

/* null or a string token. */
static cp scan_nstr(cp p, cp end) {
    if (end - p >= 4 && memcmp(p, "null", 4) == 0) return p + 4;
    return scan_str(p, end);
}

/* 0 | [1-9][0-9]{0,19}, below 2^64. */
static cp scan_int(cp p, cp end) {
    cp s = p;
    if (p >= end || *p < '0' || *p > '9') return NULL;
    if (*p == '0') return p + 1;
    while (p < end && *p >= '0' && *p <= '9') p++;
    size_t n = (size_t)(p - s);
    if (n > 20) return NULL;
    if (n == 20 && memcmp(s, "18446744073709551616", 20) >= 0) return NULL;
    return p;
}

/* [] or [str(,str)*]; ilo and ihi get the span between the brackets. */
static cp scan_arr(cp p, cp end, cp *ilo, cp *ihi) {
    if (p >= end || *p != '[') return NULL;
    p++;
    *ilo = p;
    if (p < end && *p == ']') {
        *ihi = p;
        return p + 1;
    }
    for (;;) {
        p = scan_str(p, end);
        if (!p || p >= end) return NULL;
        if (*p == ']') {
            *ihi = p;
            return p + 1;
        }
        if (*p != ',') return NULL;
        p++;
    }
}

static inline cp lit(cp p, cp end, const char *s, size_t n) {
    if ((size_t)(end - p) < n || memcmp(p, s, n) != 0) return NULL;
    return p + n;
}
#define LIT(p, end, s) lit((p), (end), (s), sizeof(s) - 1)

/* ------------------------------------------------------------------ base64 */

static signed char B64[256];
/* Two symbols at once: [c0 | c1 << 8] -> 12 bits, or 0xFFFF if either is invalid. */
static uint16_t B64PAIR[65536];

static void b64_init(void) {
    memset(B64, -1, sizeof B64);
    const char *a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; i++) B64[(unsigned char)a[i]] = (signed char)i;
    for (unsigned u = 0; u < 65536; u++) {
        int x = B64[u & 0xFF], y = B64[u >> 8];
        B64PAIR[u] = (x < 0 || y < 0) ? 0xFFFF : (uint16_t)((x << 6) | y);
    }
}

static inline unsigned pair_at(cp s) { return (unsigned)s[0] | ((unsigned)s[1] << 8); }

static inline uint64_t load_le64(const unsigned char *p) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t k;
    memcpy(&k, p, 8);
    return k;
#else
    uint64_t k = 0;
    for (int b = 7; b >= 0; b--) k = (k << 8) | p[b];
    return k;
#endif
}

/* Canonical padded base64 of a whole number of f64s; decoded into *raw (grown as
 * needed). Returns the byte count or -1 when not canonical. */
static Py_ssize_t b64_decode(cp s, size_t n, unsigned char **raw, size_t *rawcap) {
    if (n % 4) return -1;
    size_t pad = 0;
    if (n && s[n - 1] == '=') pad = (n >= 2 && s[n - 2] == '=') ? 2 : 1;
    if (pad) {
        /* The unused low bits of the last symbol must be zero. */
        if (n < 4) return -1;
        int last = B64[s[n - 1 - pad]];
        if (last < 0) return -1;
        if (pad == 2 && (last & 0x0F)) return -1;
        if (pad == 1 && (last & 0x03)) return -1;
        if (pad == 2 && n >= 3 && s[n - 3] == '=') return -1;
    }
    size_t outn = n / 4 * 3 - pad;
    if (outn % 8) return -1;
    if (outn > *rawcap) {
        unsigned char *nb = realloc(*raw, outn);
        if (!nb) return -2;
        *raw = nb;
        *rawcap = outn;
    }
    unsigned char *o = *raw;
    size_t full = pad ? n - 4 : n;
    for (size_t i = 0; i < full; i += 4) {
        uint32_t x = B64PAIR[pair_at(s + i)], y = B64PAIR[pair_at(s + i + 2)];
        if ((x | y) & 0xF000) return -1;
        uint32_t v = (x << 12) | y;
        *o++ = (unsigned char)(v >> 16);
        *o++ = (unsigned char)(v >> 8);
        *o++ = (unsigned char)v;
    }
    if (pad) {
        size_t i = n - 4;
        int a = B64[s[i]], b = B64[s[i + 1]];
        int c = pad == 1 ? B64[s[i + 2]] : 0;
        if ((a | b | c) < 0) return -1;
        uint32_t v = ((uint32_t)a << 18) | ((uint32_t)b << 12) | ((uint32_t)c << 6);
        *o++ = (unsigned char)(v >> 16);
        if (pad == 1) *o++ = (unsigned char)(v >> 8);
    }
    return (Py_ssize_t)outn;
}

/* data[lo:hi] lies inside the buffer; else releases it and raises ValueError. */
static int range_ok(Py_buffer *view, Py_ssize_t lo, Py_ssize_t hi, const char *fn) {
    if (lo >= 0 && hi <= view->len && lo <= hi) return 1;
    PyBuffer_Release(view);
    PyErr_Format(PyExc_ValueError, "%s: range out of bounds", fn);
    return 0;
}

/* ------------------------------------------------------------------ rendering */

static const char ITEM_SEP[] = ",\n        ";

/* Digits (and decimal exponent of the first) of the correctly rounded p-digit decimal
 * of x, derived from its 17-digit one d17/e17 -- exact unless the dropped digits are
 * exactly "50..0" (x may then lie on either side of the midpoint): 0 then. */
static int round_digits(const char *d17, int e17, int p, char *d, int *e) {
    int mid = d17[p] == '5';
    for (int i = p + 1; mid && i < 17; i++) mid = d17[i] == '0';
    if (mid) return 0;
    memcpy(d, d17, (size_t)p);
    *e = e17;
    if (d17[p] >= '5') {
        int i = p - 1;
        while (i >= 0 && d[i] == '9') d[i--] = '0';
        if (i >= 0) {
            d[i]++;
        } else { /* 99..9 -> 100..0 */
            d[0] = '1';
            (*e)++;
        }
    }
    return p;
}

#ifdef __SIZEOF_INT128__
typedef unsigned __int128 u128;
static u128 POW10[39]; /* filled once at module init */

static void pow10_init(void) {
    u128 v = 1;
    for (int i = 0; i < 39; i++, v *= 10) POW10[i] = v;
}

/* shortest_digits in exact integer arithmetic, for the values embeddings hold: x =
 * m * 2^-q with 0 <= q <= 126 and 1e-6 <= x < 1e15, so the scaled value N = m * 10^k of
 * every candidate fits in 128 bits. Same decisions as the printf/strtod path below:
 * the correctly rounded 15-, 16-, then 17-digit decimal, the first whose distance to x
 * is within half an ulp (exactly half: only when m is even, as strtod's
 * round-half-even reads it back). Returns 0 -- the slow path decides -- outside that
 * range, on an exact decimal tie and on a carry into a new digit. ~20x faster: a
 * cold pull formats tens of thousands of distinct values. */
static int exact_digits(uint64_t mag, char *d, int *e) {
    int be = (int)(mag >> 52);
    int q = 1075 - be;
    if (q < 0 || q > 126) return 0;
    uint64_t m = (mag & ((1ull << 52) - 1)) | (1ull << 52);
    /* Decimal exponent E of x: estimated from the binary one, then made exact. */
    int E = (int)((double)(be - 1023) * 0.30102999566398120) - 1;
    u128 D0 = 0;
    for (int tries = 0;; tries++) {
        int k = 16 - E;
        if (k < 0 || k > 22 || tries > 4) return 0;
        D0 = ((u128)m * POW10[k]) >> q;
        if (D0 >= POW10[17]) E++;
        else if (D0 < POW10[16]) E--;
        else break;
    }
    for (int p = 15; p <= 17; p++) {
        int k = p - 1 - E;
        if (k < 0) return 0; /* x >= 1e15: p digits would need a division */
        u128 N = (u128)m * POW10[k];
        u128 D = q ? N >> q : N;
        u128 r = q ? N & (((u128)1 << q) - 1) : 0;
        u128 diff = r;
        if (q) {
            u128 half = (u128)1 << (q - 1);
            if (r == half) return 0;
            if (r > half) {
                D++;
                diff = ((u128)1 << q) - r;
            }
        }
        if (D >= POW10[p]) return 0;
        u128 twice = diff << 1;
        if (twice < POW10[k] || (twice == POW10[k] && !(m & 1))) {
            uint64_t v = (uint64_t)D;
            for (int i = p - 1; i >= 0; i--, v /= 10) d[i] = (char)('0' + v % 10);
            *e = E;
            int n = p;
            while (n > 1 && d[n - 1] == '0') n--;
            return n;
        }
    }
    return 0;
}
#else
static void pow10_init(void) {}
static int exact_digits(uint64_t mag, char *d, int *e) {
    (void)mag, (void)d, (void)e;
    return 0;
}
#endif

/* Shortest round-trip digits of finite, normal, non-power-of-two x > 0 (see serde_text):
 * the correctly rounded 15-, then 16-digit decimal if it reads back as x, else 17.
 * One printf for the 17 digits; the shorter candidates are rounded from them. */
static int shortest_digits(double x, char *d, int *e) {
    char buf[48];
    snprintf(buf, sizeof buf, "%.16e", x);
    char d17[18];
    int n = 0;
    const char *q = buf;
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9' && n < 17) d17[n++] = *q;
    if (*q != 'e' || n != 17) return 0;
    int e17 = atoi(q + 1);
    for (int p = 15; p <= 16; p++) {
        char cand[24], txt[48];
        int ce;
        if (!round_digits(d17, e17, p, cand, &ce)) {
            snprintf(buf, sizeof buf, "%.*e", p - 1, x); /* exact, at the midpoint too */
            int m = 0;
            for (q = buf; *q && *q != 'e'; q++)
                if (*q >= '0' && *q <= '9' && m < p) cand[m++] = *q;
            if (*q != 'e' || m != p) return 0;
            ce = atoi(q + 1);
        }
        snprintf(txt, sizeof txt, "%c.%.*se%d", cand[0], p - 1, cand + 1, ce);
        if (strtod(txt, NULL) == x) {
            memcpy(d, cand, (size_t)p);
            *e = ce;
            n = p;
            while (n > 1 && d[n - 1] == '0') n--;
            return n;
        }
    }
    memcpy(d, d17, 17);
    *e = e17;
    n = 17;
    while (n > 1 && d[n - 1] == '0') n--;
    return n;
}

/* serde_json's text (zmij layout: plain decimal for exponents -5..15, else d.ddde±x)
 * of the f64 with bit pattern k, into buf (>= 40 bytes). Returns the length, or 0
 * where this code does not decide and the Python renderer must: powers of two, whose
 * rounding interval is asymmetric, so "nearest p-digit decimal round-trips" is not
 * the same test as "some p-digit decimal round-trips"; and subnormals, whose ulp is
 * too coarse for the 15-digit argument below.
 *
 * Shortest digits: if any decimal of <= 15 significant digits rounds to x, the
 * correctly rounded 15-digit one does (half a 15-digit step exceeds half an ulp), and
 * stripping its trailing zeros gives the shortest; else 16, else 17 -- each time the
 * correctly rounded candidate (printf and strtod are exact), i.e. the nearest, which
 * is what Python's repr and serde pick among equally short strings. */
static size_t serde_text(uint64_t k, char *out) {
    int neg = (int)(k >> 63);
    uint64_t mag = k & ~(1ull << 63);
    char *w = out;
    if (neg) *w++ = '-';
    if (mag == 0) {
        memcpy(w, "0.0", 3);
        return (size_t)(w + 3 - out);
    }
    if ((mag >> 52) == 0x7FF) {
        memcpy(out, "null", 4); /* NaN and infinities */
        return 4;
    }
    if ((mag & ((1ull << 52) - 1)) == 0) return 0; /* a power of two */
    if ((mag >> 52) == 0) return 0;                 /* subnormal: fewer digits of precision */
    double x;
    memcpy(&x, &mag, 8);
    char d[24];
    int e, n = exact_digits(mag, d, &e);
    if (!n) n = shortest_digits(x, d, &e);
    if (!n) return 0;
    while (n > 1 && d[n - 1] == '0') n--;
    if (e >= -5 && e <= 15) {
        if (n - 1 <= e) {
            memcpy(w, d, (size_t)n);
            w += n;
            for (int i = 0; i < e - n + 1; i++) *w++ = '0';
            memcpy(w, ".0", 2);
            w += 2;
        } else if (e >= 0) {
            memcpy(w, d, (size_t)(e + 1));
            w += e + 1;
            *w++ = '.';
            memcpy(w, d + e + 1, (size_t)(n - e - 1));
            w += n - e - 1;
        } else {
            *w++ = '0';
            *w++ = '.';
            for (int i = 0; i < -e - 1; i++) *w++ = '0';
            memcpy(w, d, (size_t)n);
            w += n;
        }
    } else {
        *w++ = d[0];
        if (n > 1) {
            *w++ = '.';
            memcpy(w, d + 1, (size_t)(n - 1));
            w += n - 1;
        }
        w += sprintf(w, "e%c%d", e >= 0 ? '+' : '-', e >= 0 ? e : -e);
    }
    return (size_t)(w - out);
}

/* Text of a non-zero f64 bit pattern; NULL with o->failed set on a Python error. */
static const char *float_text(out_t *o, uint64_t k, PyObject *bits_text, size_t *len,
                              char *scratch) {
    const entry *e = cache_get(k);
    if (e) {
        *len = e->len;
        return arena + e->off;
    }
    size_t n = serde_text(k, scratch);
    if (n) {
        cache_put(k, scratch, n);
        *len = n;
        return scratch;
    }
    /* The rare undecided value: ask the Python renderer (under the GIL). */
    PyEval_RestoreThread(o->ts);
    const char *res = NULL;
    PyObject *arg = PyLong_FromUnsignedLongLong(k);
    PyObject *r = arg ? PyObject_CallOneArg(bits_text, arg) : NULL;
    Py_XDECREF(arg);
    if (r && PyBytes_Check(r) && PyBytes_GET_SIZE(r) <= 64) {
        *len = (size_t)PyBytes_GET_SIZE(r);
        memcpy(scratch, PyBytes_AS_STRING(r), *len);
        cache_put(k, scratch, *len);
        res = scratch;
    } else if (r) {
        PyErr_SetString(PyExc_ValueError, "bits_text must return bytes of at most 64");
    }
    Py_XDECREF(r);
    if (!res) o->failed = 1;
    o->ts = PyEval_SaveThread();
    return res;
}

/* float_text(bits) -> bytes | None: the native float text alone, for tests. */
static PyObject *py_float_text(PyObject *Py_UNUSED(self), PyObject *arg) {
    unsigned long long k = PyLong_AsUnsignedLongLong(arg);
    if (k == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    char buf[64];
    size_t n = serde_text((uint64_t)k, buf);
    if (!n) Py_RETURN_NONE;
    return PyBytes_FromStringAndSize(buf, (Py_ssize_t)n);
}

static int put_str_array(out_t *o, cp lo, cp hi) {
    if (lo == hi) return PUT_LIT(o, "[]");
    if (PUT_LIT(o, "[\n        ") < 0) return -1;
    cp p = lo;
    int first = 1;
    while (p < hi) {
        cp e = scan_str(p, hi); /* already validated */
        if (!first && out_put(o, ITEM_SEP, sizeof ITEM_SEP - 1) < 0) return -1;
        if (out_put(o, p, (size_t)(e - p)) < 0) return -1;
        first = 0;
        p = e + 1; /* skip ',' (or step past hi at the end) */
    }
    return PUT_LIT(o, "\n      ]");
}

enum { F_CHUNK, F_CONTENT, F_EMB, F_END, F_GROUP, F_KIND, F_LABELS, F_LINKS, F_NAME,
       F_RECORD, F_SOURCE, F_START, F_STATE, F_REASON, F_TITLE, F_TOKENS, F_UPDATED,
       F_URL, NF };

/* Line/object parsers below: match literal s, or scan token f into lo[f]..hi[f]. */
#define KEY(s)          \
    p = LIT(p, end, s); \
    if (!p) return NULL;
#define TOK(f, scanner)  \
    lo[f] = p;           \
    p = scanner(p, end); \
    if (!p) return NULL; \
    hi[f] = p;

/* Parse one canonical line at p; spans into lo/hi. Returns the line end or NULL. */
static cp parse_line(cp p, cp end, cp *lo, cp *hi) {
    KEY("{\"chunk_id\":") TOK(F_CHUNK, scan_str)
    KEY(",\"content\":") TOK(F_CONTENT, scan_str)
    KEY(",\"embedding\":\"")
    lo[F_EMB] = p;
    {
        cp q = memchr(p, '"', (size_t)(end - p));
        if (!q) return NULL;
        p = q;
    }
    hi[F_EMB] = p;
    p++;
    KEY(",\"end_line\":") TOK(F_END, scan_int)
    KEY(",\"group\":") TOK(F_GROUP, scan_nstr)
    KEY(",\"kind\":") TOK(F_KIND, scan_str)
    KEY(",\"labels\":")
    p = scan_arr(p, end, &lo[F_LABELS], &hi[F_LABELS]);
    if (!p) return NULL;
    KEY(",\"links\":")
    p = scan_arr(p, end, &lo[F_LINKS], &hi[F_LINKS]);
    if (!p) return NULL;
    KEY(",\"name\":") TOK(F_NAME, scan_str)
    KEY(",\"record_id\":") TOK(F_RECORD, scan_str)
    KEY(",\"source\":") TOK(F_SOURCE, scan_str)
    KEY(",\"start_line\":") TOK(F_START, scan_int)
    KEY(",\"state\":") TOK(F_STATE, scan_nstr)
    KEY(",\"state_reason\":") TOK(F_REASON, scan_nstr)
    KEY(",\"title\":") TOK(F_TITLE, scan_str)
    KEY(",\"token_count\":") TOK(F_TOKENS, scan_int)
    KEY(",\"updated_at\":") TOK(F_UPDATED, scan_nstr)
    KEY(",\"url\":") TOK(F_URL, scan_nstr)
    KEY("}\n")
    return p;
}

#define PUT_FIELD(o, label, f) \
    (PUT_LIT(o, label) < 0 || out_put(o, lo[f], (size_t)(hi[f] - lo[f])) < 0)

typedef struct {
    uint64_t key[256]; /* 0 = empty, as in the shared table */
    const entry *hit[256];
} l1_t;

static int put_chunk(out_t *o, cp *lo, cp *hi, const unsigned char *raw, size_t nraw,
                     PyObject *bits_text, l1_t *l1) {
    if (PUT_FIELD(o, "    {\n      \"chunk_id\": ", F_CHUNK) ||
        PUT_FIELD(o, ",\n      \"record_id\": ", F_RECORD) ||
        PUT_FIELD(o, ",\n      \"kind\": ", F_KIND) ||
        PUT_FIELD(o, ",\n      \"name\": ", F_NAME) ||
        PUT_FIELD(o, ",\n      \"start_line\": ", F_START) ||
        PUT_FIELD(o, ",\n      \"end_line\": ", F_END) ||
        PUT_FIELD(o, ",\n      \"token_count\": ", F_TOKENS) ||
        PUT_FIELD(o, ",\n      \"content\": ", F_CONTENT) ||
        PUT_FIELD(o, ",\n      \"source\": ", F_SOURCE) ||
        PUT_FIELD(o, ",\n      \"url\": ", F_URL) ||
        PUT_FIELD(o, ",\n      \"state\": ", F_STATE) ||
        PUT_FIELD(o, ",\n      \"state_reason\": ", F_REASON) ||
        PUT_FIELD(o, ",\n      \"updated_at\": ", F_UPDATED) ||
        PUT_FIELD(o, ",\n      \"group\": ", F_GROUP) ||
        PUT_LIT(o, ",\n      \"labels\": ") < 0 ||
        put_str_array(o, lo[F_LABELS], hi[F_LABELS]) < 0 ||
        PUT_FIELD(o, ",\n      \"title\": ", F_TITLE) ||
        PUT_LIT(o, ",\n      \"links\": ") < 0 ||
        put_str_array(o, lo[F_LINKS], hi[F_LINKS]) < 0 ||
        PUT_LIT(o, ",\n      \"embedding\": ") < 0)
        return -1;
    if (nraw == 0) {
        if (PUT_LIT(o, "[]") < 0) return -1;
    } else {
        /* Room for the whole array up front, then unchecked writes: this loop runs
         * for every component (29M on the 100k corpus). */
        size_t dims = nraw / 8, sep = sizeof ITEM_SEP - 1;
        size_t need = dims * (sep + 64) + 32;
        if (o->len + need > o->cap && out_grow(o, need) < 0) return -1;
        char scratch[64];
        char *w = o->buf + o->len;
        memcpy(w, "[\n        ", 10);
        w += 10;
        for (size_t i = 0; i < dims; i++) {
            uint64_t k = load_le64(raw + 8 * i);
            if (i) {
                memcpy(w, ITEM_SEP, sizeof ITEM_SEP - 1);
                w += sizeof ITEM_SEP - 1;
            }
            if (k == 0) {
                memcpy(w, "0.0", 3);
                w += 3;
                continue;
            }
            /* A small direct-mapped cache in front of the shared table: a chunk's
             * non-zero components mostly share a handful of values. */
            unsigned li = (unsigned)((k * 0x9E3779B97F4A7C15ull) >> 56);
            const entry *e = l1->key[li] == k ? l1->hit[li] : cache_get(k);
            if (e) {
                l1->key[li] = k;
                l1->hit[li] = e;
                memcpy(w, arena + e->off, e->len);
                w += e->len;
                continue;
            }
            size_t n;
            o->len = (size_t)(w - o->buf);
            const char *t = float_text(o, k, bits_text, &n, scratch);
            if (!t) return -1;
            memcpy(w, t, n);
            w += n;
        }
        memcpy(w, "\n      ]", 8);
        o->len = (size_t)(w + 8 - o->buf);
    }
    return PUT_LIT(o, "\n    }");
}

static PyObject *render(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer view;
    Py_ssize_t lo_i, hi_i;
    PyObject *bits_text;
    if (!PyArg_ParseTuple(args, "y*nnO:render", &view, &lo_i, &hi_i, &bits_text)) return NULL;
    if (!range_ok(&view, lo_i, hi_i, "render")) return NULL;
    if (cache_init() < 0) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    size_t span = (size_t)(hi_i - lo_i);
    out_t o = {0};
    o.cap = span + span / 2 + 4096;
    o.bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)o.cap);
    if (!o.bytes) {
        PyBuffer_Release(&view);
        return NULL;
    }
    o.buf = PyBytes_AS_STRING(o.bytes);

    cp base = (cp)view.buf;
    cp p = base + lo_i, end = base + hi_i;
    unsigned char *raw = NULL;
    size_t rawcap = 0;
    Py_ssize_t count = 0;
    int canonical = 1;
    cp lo[NF], hi[NF];
    static const l1_t l1_empty;
    l1_t l1 = l1_empty;

    o.ts = PyEval_SaveThread();
    while (p < end) {
        cp next = parse_line(p, end, lo, hi);
        if (!next) {
            canonical = 0;
            break;
        }
        Py_ssize_t nraw = b64_decode(lo[F_EMB], (size_t)(hi[F_EMB] - lo[F_EMB]), &raw, &rawcap);
        if (nraw == -2) {
            o.failed = 1;
            break;
        }
        if (nraw < 0) {
            canonical = 0;
            break;
        }
        if (count && PUT_LIT(&o, ",\n") < 0) break;
        if (put_chunk(&o, lo, hi, raw, (size_t)nraw, bits_text, &l1) < 0) break;
        count++;
        p = next;
    }
    PyEval_RestoreThread(o.ts);
    free(raw);
    PyBuffer_Release(&view);

    int done = canonical && p >= end && !o.failed;
    if (o.failed && !PyErr_Occurred()) PyErr_NoMemory();
    if (!done) {
        Py_XDECREF(o.bytes);
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    if (_PyBytes_Resize(&o.bytes, (Py_ssize_t)o.len) < 0) return NULL;
    PyObject *res = Py_BuildValue("(nN)", count, o.bytes);
    return res;
}

/* Room for one more row of `width` spans; -1 when out of memory. */
static int spans_room(cp **spans, size_t *cap, size_t n, size_t width) {
    if (n < *cap) return 0;
    cp *grown = realloc(*spans, *cap * 2 * width * sizeof(cp));
    if (!grown) return -1;
    *spans = grown;
    *cap *= 2;
    return 0;
}

/* tokens(data, lo, hi) -> list[(record_id token, content token)] | None
 *
 * The shrink guard's view of canonical lines: the same acceptance as render (so the
 * strict path still decides anything else), but only the two raw JSON string tokens
 * the guard hashes are returned. */
static PyObject *tokens(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer view;
    Py_ssize_t lo_i, hi_i;
    if (!PyArg_ParseTuple(args, "y*nn:tokens", &view, &lo_i, &hi_i)) return NULL;
    if (!range_ok(&view, lo_i, hi_i, "tokens")) return NULL;
    cp base = (cp)view.buf;
    cp p = base + lo_i, end = base + hi_i;
    size_t n = 0, cap = 1024;
    cp *spans = malloc(cap * 4 * sizeof(cp));
    unsigned char *raw = NULL;
    size_t rawcap = 0;
    int canonical = 1, nomem = spans == NULL;
    cp lo[NF], hi[NF];
    Py_BEGIN_ALLOW_THREADS
    while (!nomem && p < end) {
        cp next = parse_line(p, end, lo, hi);
        Py_ssize_t nraw =
            next ? b64_decode(lo[F_EMB], (size_t)(hi[F_EMB] - lo[F_EMB]), &raw, &rawcap) : -1;
        if (nraw == -2) {
            nomem = 1;
            break;
        }
        if (nraw < 0) {
            canonical = 0;
            break;
        }
        if (spans_room(&spans, &cap, n, 4) < 0) {
            nomem = 1;
            break;
        }
        spans[4 * n] = lo[F_RECORD];
        spans[4 * n + 1] = hi[F_RECORD];
        spans[4 * n + 2] = lo[F_CONTENT];
        spans[4 * n + 3] = hi[F_CONTENT];
        n++;
        p = next;
    }
    Py_END_ALLOW_THREADS
    free(raw);
    PyObject *out = NULL;
    if (nomem) {
        PyErr_NoMemory();
    } else if (!canonical) {
        out = Py_NewRef(Py_None);
    } else if ((out = PyList_New((Py_ssize_t)n)) != NULL) {
        for (size_t i = 0; i < n; i++) {
            PyObject *t = Py_BuildValue(
                "(y#y#)", (const char *)spans[4 * i], (Py_ssize_t)(spans[4 * i + 1] - spans[4 * i]),
                (const char *)spans[4 * i + 2],
                (Py_ssize_t)(spans[4 * i + 3] - spans[4 * i + 2]));
            if (!t) {
                Py_CLEAR(out);
                break;
            }
            PyList_SET_ITEM(out, (Py_ssize_t)i, t);
        }
    }
    free(spans);
    PyBuffer_Release(&view);
    return out;
}


/* ------------------------------------------------------------------ export (push) */

/* Growable malloc buffer for GIL-free output. */
typedef struct {
    char *buf;
    size_t len, cap;
    int nomem;
} mbuf;

/* Room for n more bytes; -1 (and nomem set) when out of memory. */
static int mb_reserve(mbuf *b, size_t n) {
    if (b->nomem) return -1;
    if (b->len + n > b->cap) {
        size_t cap = b->cap + b->cap / 2 + n + 4096;
        char *nb = realloc(b->buf, cap);
        if (!nb) {
            b->nomem = 1;
            return -1;
        }
        b->buf = nb;
        b->cap = cap;
    }
    return 0;
}

static int mb_put(mbuf *b, const void *p, size_t n) {
    if (mb_reserve(b, n) < 0) return -1;
    memcpy(b->buf + b->len, p, n);
    b->len += n;
    return 0;
}
#define MB_LIT(b, s) mb_put((b), (s), sizeof(s) - 1)

static const char B64ALPHA[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int mb_b64(mbuf *b, const unsigned char *p, size_t n) {
    if (mb_reserve(b, (n + 2) / 3 * 4) < 0) return -1;
    char *w = b->buf + b->len;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = ((uint32_t)p[i] << 16) | ((uint32_t)p[i + 1] << 8) | p[i + 2];
        *w++ = B64ALPHA[v >> 18];
        *w++ = B64ALPHA[(v >> 12) & 63];
        *w++ = B64ALPHA[(v >> 6) & 63];
        *w++ = B64ALPHA[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)p[i] << 16;
        *w++ = B64ALPHA[v >> 18];
        *w++ = B64ALPHA[(v >> 12) & 63];
        *w++ = '=';
        *w++ = '=';
    } else if (n - i == 2) {
        uint32_t v = ((uint32_t)p[i] << 16) | ((uint32_t)p[i + 1] << 8);
        *w++ = B64ALPHA[v >> 18];
        *w++ = B64ALPHA[(v >> 12) & 63];
        *w++ = B64ALPHA[(v >> 6) & 63];
        *w++ = '=';
    }
    b->len = (size_t)(w - b->buf);
    return 0;
}

/* A JSON number exactly as cck._JSON_NUMBER admits it, parsed like Python's float()
 * (both correctly rounded); 0 = not a finite number of that grammar. */
static int parse_number(cp s, size_t n, double *out) {
    size_t i = 0;
    if (i < n && s[i] == '-') i++;
    if (i >= n) return 0;
    if (s[i] == '0') {
        i++;
    } else if (s[i] >= '1' && s[i] <= '9') {
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    } else {
        return 0;
    }
    if (i < n && s[i] == '.') {
        i++;
        size_t d = i;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
        if (i == d) return 0;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        size_t d = i;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
        if (i == d) return 0;
    }
    if (i != n || n >= 64) return 0; /* longer tokens: left to the Python path */
    char tmp[64];
    memcpy(tmp, s, n);
    tmp[n] = 0;
    double x = strtod(tmp, NULL);
    if (!(x - x == 0.0)) return 0; /* inf or nan */
    *out = x;
    return 1;
}

/* Text -> f64 memo for one call: embedding values repeat heavily. */
#define NUMC_BITS 14
typedef struct {
    unsigned char len;
    char text[31];
    double value;
} numc_entry;

static int number_of(numc_entry *memo, cp s, size_t n, double *out) {
    if (n == 3 && s[0] == '0' && s[1] == '.' && s[2] == '0') {
        *out = 0.0;
        return 1;
    }
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
    numc_entry *e = &memo[h >> (64 - NUMC_BITS)];
    if (e->len == n && memcmp(e->text, s, n) == 0) {
        *out = e->value;
        return 1;
    }
    if (!parse_number(s, n, out)) return 0;
    if (n < sizeof e->text) {
        e->len = (unsigned char)n;
        memcpy(e->text, s, n);
        e->value = *out;
    }
    return 1;
}

/* [] or [\n        STR(,\n        STR)*\n      ] -> span of the whole array. */
static cp scan_parr(cp p, cp end) {
    if (end - p >= 2 && p[0] == '[' && p[1] == ']') return p + 2;
    p = LIT(p, end, "[\n        ");
    if (!p) return NULL;
    for (;;) {
        p = scan_str(p, end);
        if (!p) return NULL;
        cp q = LIT(p, end, ",\n        ");
        if (q) {
            p = q;
            continue;
        }
        return LIT(p, end, "\n      ]");
    }
}

/* Canonical form of a pretty string array: [a,b]. */
static int put_carr(mbuf *b, cp lo, cp hi) {
    if (mb_put(b, "[", 1) < 0) return -1;
    if (hi - lo > 2) {
        cp p = lo + 10; /* after "[\n        " */
        int first = 1;
        while (p < hi && *p == '"') {
            cp e = scan_str(p, hi);
            if (!first && mb_put(b, ",", 1) < 0) return -1;
            if (mb_put(b, p, (size_t)(e - p)) < 0) return -1;
            first = 0;
            p = e + 10; /* skip ",\n        " (or run past the closing "\n      ]") */
        }
    }
    return mb_put(b, "]", 1);
}

enum { S_CHUNK, S_RECORD, S_KIND, S_NAME, S_START, S_END, S_TOKENS, S_CONTENT, S_SOURCE,
       S_URL, S_STATE, S_REASON, S_UPDATED, S_GROUP, S_LABELS, S_TITLE, S_LINKS, S_EMB, NS };

static cp parse_store_obj(cp p, cp end, cp *lo, cp *hi) {
    KEY("    {\n      \"chunk_id\": ") TOK(S_CHUNK, scan_str)
    KEY(",\n      \"record_id\": ") TOK(S_RECORD, scan_str)
    KEY(",\n      \"kind\": ") TOK(S_KIND, scan_str)
    KEY(",\n      \"name\": ") TOK(S_NAME, scan_str)
    KEY(",\n      \"start_line\": ") TOK(S_START, scan_int)
    KEY(",\n      \"end_line\": ") TOK(S_END, scan_int)
    KEY(",\n      \"token_count\": ") TOK(S_TOKENS, scan_int)
    KEY(",\n      \"content\": ") TOK(S_CONTENT, scan_str)
    KEY(",\n      \"source\": ") TOK(S_SOURCE, scan_str)
    KEY(",\n      \"url\": ") TOK(S_URL, scan_nstr)
    KEY(",\n      \"state\": ") TOK(S_STATE, scan_nstr)
    KEY(",\n      \"state_reason\": ") TOK(S_REASON, scan_nstr)
    KEY(",\n      \"updated_at\": ") TOK(S_UPDATED, scan_nstr)
    KEY(",\n      \"group\": ") TOK(S_GROUP, scan_nstr)
    KEY(",\n      \"labels\": ") TOK(S_LABELS, scan_parr)
    KEY(",\n      \"title\": ") TOK(S_TITLE, scan_str)
    KEY(",\n      \"links\": ") TOK(S_LINKS, scan_parr)
    KEY(",\n      \"embedding\": ")
    lo[S_EMB] = p;
    if (end - p >= 2 && p[0] == '[' && p[1] == ']') {
        p += 2;
    } else {
        KEY("[\n        ")
        for (;;) {
            cp t = p;
            while (p < end && ((*p >= '0' && *p <= '9') || *p == '-' || *p == '+' || *p == '.' ||
                               *p == 'e' || *p == 'E'))
                p++;
            if (p == t) return NULL;
            cp q = LIT(p, end, ",\n        ");
            if (q) {
                p = q;
                continue;
            }
            KEY("\n      ]")
            break;
        }
    }
    hi[S_EMB] = p;
    KEY("\n    }")
    return p;
}

#define PUT_S(b, lit_, f) \
    (MB_LIT(b, lit_) < 0 || mb_put(b, lo[f], (size_t)(hi[f] - lo[f])) < 0)

/* export(data, lo, hi) -> (lines, [(record_id, content, updated_at) tokens], phase_a) | None
 *
 * Canonical .cck lines for the store chunk objects in data[lo:hi] (objects joined by
 * ",\n", in the writer's exact layout): a drop-in for cck._fast_export_range. */
static PyObject *export(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer view;
    Py_ssize_t lo_i, hi_i;
    if (!PyArg_ParseTuple(args, "y*nn:export", &view, &lo_i, &hi_i)) return NULL;
    if (!range_ok(&view, lo_i, hi_i, "export")) return NULL;
    if (localeconv()->decimal_point[0] != '.' || localeconv()->decimal_point[1]) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE; /* strtod would not read JSON numbers */
    }
    cp base = (cp)view.buf;
    cp p = base + lo_i, end = base + hi_i;
    mbuf out = {0}, emb = {0};
    size_t n = 0, cap = 1024;
    cp *spans = malloc(cap * 6 * sizeof(cp));
    numc_entry *memo = calloc((size_t)1 << NUMC_BITS, sizeof(numc_entry));
    int ok = 1, phase_a = 0, nomem = !spans || !memo;
    cp lo[NS], hi[NS];
    Py_BEGIN_ALLOW_THREADS
    while (!nomem && p < end) {
        cp next = parse_store_obj(p, end, lo, hi);
        if (!next) {
            ok = 0;
            break;
        }
        if (next < end) {
            if (end - next < 2 || next[0] != ',' || next[1] != '\n') {
                ok = 0;
                break;
            }
            next += 2;
        }
        p = next;
        if (hi[S_EMB] - lo[S_EMB] == 2) { /* [] : a Phase-A chunk, refused by the caller */
            phase_a = 1;
            continue;
        }
        if (phase_a) continue;
        /* embedding: text -> LE f64 bytes */
        emb.len = 0;
        cp t = lo[S_EMB] + 10;
        for (;;) {
            cp e = t;
            while (*e != ',' && *e != '\n') e++;
            double x;
            if (!number_of(memo, t, (size_t)(e - t), &x)) {
                ok = 0;
                break;
            }
            unsigned char le[8];
            uint64_t bits;
            memcpy(&bits, &x, 8);
            for (int k = 0; k < 8; k++) le[k] = (unsigned char)(bits >> (8 * k));
            if (mb_put(&emb, le, 8) < 0) break;
            if (*e == '\n') break;
            t = e + 10;
        }
        if (!ok || emb.nomem) break;
        if (MB_LIT(&out, "{\"chunk_id\":") < 0 || mb_put(&out, lo[S_CHUNK], (size_t)(hi[S_CHUNK] - lo[S_CHUNK])) < 0 ||
            PUT_S(&out, ",\"content\":", S_CONTENT) || MB_LIT(&out, ",\"embedding\":\"") < 0 ||
            mb_b64(&out, (const unsigned char *)emb.buf, emb.len) < 0 ||
            PUT_S(&out, "\",\"end_line\":", S_END) || PUT_S(&out, ",\"group\":", S_GROUP) ||
            PUT_S(&out, ",\"kind\":", S_KIND) || MB_LIT(&out, ",\"labels\":") < 0 ||
            put_carr(&out, lo[S_LABELS], hi[S_LABELS]) < 0 || MB_LIT(&out, ",\"links\":") < 0 ||
            put_carr(&out, lo[S_LINKS], hi[S_LINKS]) < 0 || PUT_S(&out, ",\"name\":", S_NAME) ||
            PUT_S(&out, ",\"record_id\":", S_RECORD) || PUT_S(&out, ",\"source\":", S_SOURCE) ||
            PUT_S(&out, ",\"start_line\":", S_START) || PUT_S(&out, ",\"state\":", S_STATE) ||
            PUT_S(&out, ",\"state_reason\":", S_REASON) || PUT_S(&out, ",\"title\":", S_TITLE) ||
            PUT_S(&out, ",\"token_count\":", S_TOKENS) ||
            PUT_S(&out, ",\"updated_at\":", S_UPDATED) || PUT_S(&out, ",\"url\":", S_URL) ||
            MB_LIT(&out, "}\n") < 0)
            break;
        if (spans_room(&spans, &cap, n, 6) < 0) {
            nomem = 1;
            break;
        }
        cp *sp = spans + 6 * n++;
        sp[0] = lo[S_RECORD], sp[1] = hi[S_RECORD];
        sp[2] = lo[S_CONTENT], sp[3] = hi[S_CONTENT];
        sp[4] = lo[S_UPDATED], sp[5] = hi[S_UPDATED];
    }
    Py_END_ALLOW_THREADS
    nomem = nomem || out.nomem || emb.nomem;
    PyObject *res = NULL;
    if (nomem) {
        PyErr_NoMemory();
    } else if (!ok || p < end) {
        res = Py_NewRef(Py_None);
    } else {
        PyObject *lines = PyBytes_FromStringAndSize(out.buf ? out.buf : "", (Py_ssize_t)out.len);
        PyObject *toks = lines ? PyList_New((Py_ssize_t)n) : NULL;
        for (size_t i = 0; toks && i < n; i++) {
            cp *sp = spans + 6 * i;
            PyObject *t = Py_BuildValue("(y#y#y#)", (const char *)sp[0], (Py_ssize_t)(sp[1] - sp[0]),
                                        (const char *)sp[2], (Py_ssize_t)(sp[3] - sp[2]),
                                        (const char *)sp[4], (Py_ssize_t)(sp[5] - sp[4]));
            if (!t) {
                Py_CLEAR(toks);
                break;
            }
            PyList_SET_ITEM(toks, (Py_ssize_t)i, t);
        }
        if (toks) res = Py_BuildValue("(NNO)", lines, toks, phase_a ? Py_True : Py_False);
        else Py_XDECREF(lines);
    }
    free(out.buf);
    free(emb.buf);
    free(spans);
    free(memo);
    PyBuffer_Release(&view);
    return res;
}

static PyMethodDef methods[] = {
    {"export", export, METH_VARARGS,
     "export(data, lo, hi) -> (lines, [(record_id, content, updated_at)], phase_a) | None\n\n"
     "Canonical .cck lines for the store chunk objects in data[lo:hi]; None when any\n"
     "object is not in the writer's exact layout (then the Python path decides)."},
    {"tokens", tokens, METH_VARARGS,
     "tokens(data, lo, hi) -> list[(record_id, content)] | None\n\n"
     "Raw JSON string tokens of the canonical .cck chunk lines in data[lo:hi]; None when\n"
     "any line is not canonical (same acceptance as render)."},
    {"render", render, METH_VARARGS,
     "render(data, lo, hi, bits_text) -> (count, bytes) | None\n\n"
     "Store chunk texts for the canonical .cck chunk lines in data[lo:hi], joined by\n"
     "\",\\n\"; None when any line is not canonical."},
    {"float_text", py_float_text, METH_O,
     "float_text(bits) -> bytes | None\n\nserde's text of the f64 with these bits, or None\n"
     "where the native code defers to the Python renderer (powers of two)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_cckfast", "Native fast path for .cck import (optional).", -1,
    methods, NULL, NULL, NULL, NULL,
};

#ifndef NATIVE_SOURCE_SHA256
#define NATIVE_SOURCE_SHA256 ""
#endif

PyMODINIT_FUNC PyInit__cckfast(void) {
    b64_init();
    pow10_init();
    PyObject *m = PyModule_Create(&module);
    /* Lets the loader refuse a module compiled from an older _cckfast.c. */
    if (m && PyModule_AddStringConstant(m, "SOURCE_SHA256", NATIVE_SOURCE_SHA256) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
