/*
 * Optional native accelerator for the search-index build (see analyze_native.py).
 *
 * `Gatherer` does, in one C pass per section, what the pure Python build does with
 * `analyze.analyze`, `collections.Counter` and a dict of term ids: it splits the text
 * into words, sub-words and neighbour pairs exactly as analyze.py does, numbers the
 * terms, and appends the per-section and per-record rows of the default ranking
 * (search_index_build.py) to flat integer buffers. No Python object is made per word:
 * on rfcs that loop was most of the index command's search-index step.
 *
 * Everything here is a copy of analyze.py's rules (ASCII word runs, ASCII lowercasing,
 * the stopword set handed in by the caller, the suffix stemmer, identifier sub-words);
 * tests/retrieval/test_analyze_native.py holds the two to the same output on random and
 * hostile text, and the index bytes built both ways equal. Every step is linear in its
 * input: one scan per token, keyed hash tables kept half empty, no backtracking.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ growable arrays */

typedef struct {
    void *p;
    Py_ssize_t n, cap;
} vec;

static int vec_reserve(vec *v, Py_ssize_t more, size_t item) {
    /* Never NULL once reserved, even for nothing: memcpy(NULL, _, 0) is undefined. */
    if (v->p && v->n + more <= v->cap) return 0;
    Py_ssize_t cap = v->cap ? v->cap : 64;
    while (cap < v->n + more) {
        if (cap > PY_SSIZE_T_MAX / 2 / (Py_ssize_t)item) {
            PyErr_NoMemory();
            return -1;
        }
        cap *= 2;
    }
    void *p = PyMem_Realloc(v->p, (size_t)cap * item);
    if (!p) {
        PyErr_NoMemory();
        return -1;
    }
    v->p = p;
    v->cap = cap;
    return 0;
}

#define VEC_AT(v, T) ((T *)(v).p)
#define PUSH(v, T, x)                                                          \
    (vec_reserve(&(v), 1, sizeof(T)) < 0 ? -1 : (VEC_AT(v, T)[(v).n++] = (x), 0))

static void vec_free(vec *v) {
    PyMem_Free(v->p);
    v->p = NULL;
    v->n = v->cap = 0;
}

/* ------------------------------------------------------------------ hashing */

/* Python's own keyed string hash (SipHash, with the process's random key): the words
 * and pairs come from untrusted text, and an unkeyed hash would let crafted text pile
 * them into one probe chain (quadratic time). The key changes the tables' layout only:
 * term ids are numbered in first-seen order, so the output never depends on it. */
static uint64_t hash_bytes(const char *s, Py_ssize_t n) { return (uint64_t)_Py_HashBytes(s, n); }

static uint64_t hash_pair(uint32_t a, uint32_t b) {
    uint32_t key[2] = {a, b};
    return (uint64_t)_Py_HashBytes(key, sizeof key);
}

/* An open-addressing table of int32 values (-1 = empty) whose keys live elsewhere:
 * the caller compares. Kept at most half full. */
typedef struct {
    int32_t *slot;
    uint64_t mask;
    Py_ssize_t used;
} table;

static int table_init(table *t, uint64_t size) {
    t->slot = PyMem_Malloc(size * sizeof(int32_t));
    if (!t->slot) {
        PyErr_NoMemory();
        return -1;
    }
    memset(t->slot, 0xff, size * sizeof(int32_t));
    t->mask = size - 1;
    t->used = 0;
    return 0;
}

/* ------------------------------------------------------------------ the gatherer */

#define TOKEN_CACHE_MAX (1 << 20) /* distinct tokens remembered (memory bound) */

typedef struct {
    PyObject_HEAD
    /* Vocabulary: term i is tbuf[toff[i] .. toff[i] + tlen[i]]. */
    vec tbuf;  /* char */
    vec toff;  /* int64 */
    vec tlen;  /* int32 */
    vec thash; /* uint64: each term's hash (a word's table grows without rereading) */
    table terms;
    /* Neighbour pairs: pair (a, b) -> its term id. */
    vec pkey; /* uint64: a << 32 | b, by pair number */
    vec pid;  /* int32: the pair's term id, by pair number */
    table pairs;
    /* Token cache: token bytes -> its terms (kids[kstart[k] .. kstart[k+1]]). */
    vec kbuf;   /* char */
    vec koff;   /* int64 */
    vec klen;   /* int32 */
    vec khash;  /* uint64 */
    vec kstart; /* int64, one more than tokens */
    vec kids;   /* int32 */
    table tokens;
    /* Stopwords (the caller's set): a table over their own buffer. */
    vec sbuf, soff, slen, shash;
    table stops;
    /* Scratch: the token being read, its lowercase form, its parts, the terms of one
     * token, the analysis of one text, the first terms of its runs. */
    vec tok, low, parts, tterms, seq, firsts, word;
    /* Per-term slots (sized to the vocabulary): the term's row in the open section's /
     * record's / title's / lead's count. A slot is believed only when that row holds
     * the term (a sparse set: nothing to clear between sections). */
    vec sec_slot, rec_slot, tit_slot, lead_slot;
    /* The open record: its terms in first-seen order with body counts, its length, its
     * lead terms' counts. */
    vec r_ids, r_tf, l_ids, l_tf; /* int32 */
    int64_t r_len, l_len;
    int32_t lead_terms;
    int bigrams;
    /* Output rows (search_index_build._RecordRows / _SectionRows). */
    vec rec_tid, rec_tf_title, rec_tf_body, rec_tf_lead;     /* int32 */
    vec rec_n, title_n, title_len, body_len, lead_len;       /* int64 */
    vec title_tid;                                           /* int32 */
    vec sec_tid, sec_tf;                                     /* int32 */
    vec sec_n, sec_length;                                   /* int64 */
} Gatherer;

static void gatherer_dealloc(Gatherer *g) {
    vec *vs[] = {
        &g->tbuf, &g->toff, &g->tlen, &g->thash, &g->pkey, &g->pid, &g->kbuf, &g->koff,
        &g->klen, &g->khash, &g->kstart, &g->kids, &g->sbuf, &g->soff, &g->slen, &g->shash, &g->tok,
        &g->low, &g->parts, &g->tterms, &g->seq, &g->firsts, &g->word, &g->sec_slot,
        &g->rec_slot, &g->tit_slot, &g->lead_slot, &g->r_ids, &g->r_tf, &g->l_ids, &g->l_tf,
        &g->rec_tid, &g->rec_tf_title, &g->rec_tf_body, &g->rec_tf_lead, &g->rec_n,
        &g->title_n, &g->title_len, &g->body_len, &g->lead_len, &g->title_tid, &g->sec_tid,
        &g->sec_tf, &g->sec_n, &g->sec_length,
    };
    for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) vec_free(vs[i]);
    PyMem_Free(g->terms.slot);
    PyMem_Free(g->pairs.slot);
    PyMem_Free(g->tokens.slot);
    PyMem_Free(g->stops.slot);
    Py_TYPE(g)->tp_free((PyObject *)g);
}

/* How a table finds value v's hash when it grows: from `ctx`, an array by value. */
typedef uint64_t (*hash_of)(const void *ctx, int32_t v);

static uint64_t stored_hash(const void *hashes, int32_t v) {
    return ((const uint64_t *)hashes)[v];
}

static uint64_t pair_key_hash(const void *keys, int32_t v) {
    uint64_t k = ((const uint64_t *)keys)[v];
    return hash_pair((uint32_t)(k >> 32), (uint32_t)k);
}

/* Put value v in the empty slot j (where its probe ended); once the table is half full,
 * double it and re-place every value. */
static int table_put(table *t, uint64_t j, int32_t v, hash_of hash, const void *ctx) {
    t->slot[j] = v;
    if (++t->used * 2 <= (Py_ssize_t)(t->mask + 1)) return 0;
    int32_t *old = t->slot;
    uint64_t old_size = t->mask + 1;
    if (table_init(t, old_size * 2) < 0) {
        t->slot = old;
        return -1;
    }
    for (uint64_t i = 0; i < old_size; i++) {
        int32_t w = old[i];
        if (w < 0) continue;
        uint64_t k = hash(ctx, w) & t->mask;
        while (t->slot[k] >= 0) k = (k + 1) & t->mask;
        t->slot[k] = w;
        t->used++;
    }
    PyMem_Free(old);
    return 0;
}

/* Grow the per-term slot arrays to the vocabulary's size (new terms: no slot). */
static int slots_fit(Gatherer *g) {
    Py_ssize_t n = g->toff.n;
    vec *vs[] = {&g->sec_slot, &g->rec_slot, &g->tit_slot, &g->lead_slot};
    for (size_t k = 0; k < sizeof vs / sizeof vs[0]; k++) {
        vec *v = vs[k];
        if (v->n >= n) continue;
        if (vec_reserve(v, n - v->n, sizeof(int32_t)) < 0) return -1;
        /* -1: a slot no row can confirm */
        memset(VEC_AT(*v, int32_t) + v->n, 0xff, (size_t)(n - v->n) * sizeof(int32_t));
        v->n = n;
    }
    return 0;
}

/* Append term s[0..n) to the vocabulary (the caller knows it is new); its id. */
static int32_t new_term(Gatherer *g, const char *s, Py_ssize_t n, uint64_t h) {
    if (g->toff.n >= INT32_MAX || n > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError,
                        "the search index holds at most 2^31 terms, each under 2 GiB");
        return -1;
    }
    int32_t id = (int32_t)g->toff.n;
    if (vec_reserve(&g->tbuf, n, 1) < 0 || PUSH(g->toff, int64_t, g->tbuf.n) < 0 ||
        PUSH(g->tlen, int32_t, (int32_t)n) < 0 || PUSH(g->thash, uint64_t, h) < 0)
        return -1;
    memcpy(VEC_AT(g->tbuf, char) + g->tbuf.n, s, (size_t)n);
    g->tbuf.n += n;
    if (slots_fit(g) < 0) return -1;
    return id;
}

/* The id of the word term s[0..n), added when new. */
static int32_t term_id(Gatherer *g, const char *s, Py_ssize_t n) {
    uint64_t h = hash_bytes(s, n);
    uint64_t j = h & g->terms.mask;
    const char *buf = VEC_AT(g->tbuf, char);
    for (int32_t v; (v = g->terms.slot[j]) >= 0; j = (j + 1) & g->terms.mask) {
        if (VEC_AT(g->thash, uint64_t)[v] == h && VEC_AT(g->tlen, int32_t)[v] == n &&
            memcmp(buf + VEC_AT(g->toff, int64_t)[v], s, (size_t)n) == 0)
            return v;
    }
    int32_t id = new_term(g, s, n, h);
    if (id < 0) return -1;
    return table_put(&g->terms, j, id, stored_hash, g->thash.p) < 0 ? -1 : id;
}

/* The term id of the pair "<term a> <term b>", added when new. */
static int32_t pair_id(Gatherer *g, int32_t a, int32_t b) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    uint64_t h = hash_pair((uint32_t)a, (uint32_t)b);
    uint64_t j = h & g->pairs.mask;
    for (int32_t v; (v = g->pairs.slot[j]) >= 0; j = (j + 1) & g->pairs.mask) {
        if (VEC_AT(g->pkey, uint64_t)[v] == key) return VEC_AT(g->pid, int32_t)[v];
    }
    /* Terms hold no space, so "a b" names one pair only and is never a word's term:
     * the text goes straight into the vocabulary, not into the word terms' table
     * (nothing looks a pair up by its text). */
    Py_ssize_t la = VEC_AT(g->tlen, int32_t)[a], lb = VEC_AT(g->tlen, int32_t)[b];
    g->word.n = 0;
    if (vec_reserve(&g->word, la + lb + 1, 1) < 0) return -1;
    char *w = VEC_AT(g->word, char);
    memcpy(w, VEC_AT(g->tbuf, char) + VEC_AT(g->toff, int64_t)[a], (size_t)la);
    w[la] = ' ';
    memcpy(w + la + 1, VEC_AT(g->tbuf, char) + VEC_AT(g->toff, int64_t)[b], (size_t)lb);
    int32_t id = new_term(g, w, la + lb + 1, h);
    if (id < 0) return -1;
    if (g->pkey.n >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "the search index holds at most 2^31 word pairs");
        return -1;
    }
    int32_t pn = (int32_t)g->pkey.n;
    if (PUSH(g->pkey, uint64_t, key) < 0 || PUSH(g->pid, int32_t, id) < 0) return -1;
    /* The pair table's hashes are recomputed from the keys when it grows. */
    if (table_put(&g->pairs, j, pn, pair_key_hash, g->pkey.p) < 0) return -1;
    return id;
}

/* Is s[0..n) a stopword? *end: the empty slot where its probe ended (when not). */
static int find_stopword(const Gatherer *g, const char *s, Py_ssize_t n, uint64_t *end) {
    uint64_t j = hash_bytes(s, n) & g->stops.mask;
    for (int32_t v; (v = g->stops.slot[j]) >= 0; j = (j + 1) & g->stops.mask) {
        if (VEC_AT(g->slen, int32_t)[v] == n &&
            memcmp(VEC_AT(g->sbuf, char) + VEC_AT(g->soff, int64_t)[v], s, (size_t)n) == 0)
            return 1;
    }
    *end = j;
    return 0;
}

static int is_stopword(const Gatherer *g, const char *s, Py_ssize_t n) {
    uint64_t end;
    return find_stopword(g, s, n, &end);
}

static int add_stopword(Gatherer *g, const char *s, Py_ssize_t n) {
    uint64_t j;
    if (find_stopword(g, s, n, &j)) return 0;
    int32_t v = (int32_t)g->soff.n;
    if (vec_reserve(&g->sbuf, n, 1) < 0 || PUSH(g->soff, int64_t, g->sbuf.n) < 0 ||
        PUSH(g->slen, int32_t, (int32_t)n) < 0 || PUSH(g->shash, uint64_t, hash_bytes(s, n)) < 0)
        return -1;
    memcpy(VEC_AT(g->sbuf, char) + g->sbuf.n, s, (size_t)n);
    g->sbuf.n += n;
    return table_put(&g->stops, j, v, stored_hash, g->shash.p);
}

/* ------------------------------------------------------------------ the stemmer */

static int ends(const char *w, Py_ssize_t n, const char *suf) {
    Py_ssize_t k = (Py_ssize_t)strlen(suf);
    return n >= k && memcmp(w + n - k, suf, (size_t)k) == 0;
}

static int is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

static int has_vowel(const char *w, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        switch (w[i]) {
        case 'a': case 'e': case 'i': case 'o': case 'u': case 'y':
            return 1;
        }
    }
    return 0;
}

/* analyze.stem on w[0..*n) in place (the buffer has room for one more byte). */
static void stem(char *w, Py_ssize_t *np) {
    Py_ssize_t n = *np;
    if (n <= 3) return;
    for (Py_ssize_t i = 0; i < n; i++)
        if (!is_alpha(w[i])) return;
    /* _singular */
    if (ends(w, n, "sses")) {
        n -= 2;
    } else if (ends(w, n, "ies") && n > 4) {
        n -= 3;
        w[n++] = 'y';
    } else if (ends(w, n, "s") && !ends(w, n, "ss") && !ends(w, n, "us") && !ends(w, n, "is")) {
        n -= 1;
    }
    /* _strip_suffix: the first suffix (in this order) that ends the word decides. */
    static const char *const suffixes[] = {"ational", "ation", "ations", "ator", "ness", "ment",
                                           "ingly",   "edly",  "ly",     "ing",  "ed"};
    for (size_t k = 0; k < sizeof suffixes / sizeof suffixes[0]; k++) {
        const char *suf = suffixes[k];
        if (!ends(w, n, suf)) continue;
        Py_ssize_t b = n - (Py_ssize_t)strlen(suf);
        if (b < 3 || !has_vowel(w, b)) break;
        int short_suf = strcmp(suf, "ing") == 0 || strcmp(suf, "ed") == 0;
        if (short_suf && b >= 4 && w[b - 1] == w[b - 2] && w[b - 1] != 'l' && w[b - 1] != 's' &&
            w[b - 1] != 'z')
            n = b - 1;
        else
            n = b;
        break;
    }
    /* _tidy */
    if ((ends(w, n, "ize") || ends(w, n, "ise")) && n > 5) n -= 3;
    if (n > 4 && w[n - 1] == 'e') n -= 1;
    if (n > 4 && w[n - 1] == 'y') w[n - 1] = 'i';
    *np = n;
}

/* analyze._term: the stemmed term of the lowercase word w[0..n), or -1 for a stopword;
 * -2 on error. */
static int32_t word_term(Gatherer *g, const char *w, Py_ssize_t n) {
    if (is_stopword(g, w, n)) return -1;
    g->word.n = 0;
    if (vec_reserve(&g->word, n + 1, 1) < 0) return -2;
    char *buf = VEC_AT(g->word, char);
    memcpy(buf, w, (size_t)n);
    stem(buf, &n);
    int32_t id = term_id(g, buf, n);
    return id < 0 ? -2 : id;
}

static int is_upper(char c) { return c >= 'A' && c <= 'Z'; }
static int is_lower(char c) { return c >= 'a' && c <= 'z'; }
static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* analyze._token_terms for the token t[0..n): its term ids into g->tterms. */
static int token_terms(Gatherer *g, const char *t, Py_ssize_t n) {
    g->tterms.n = 0;
    g->low.n = 0;
    g->parts.n = 0;
    if (vec_reserve(&g->low, n, 1) < 0) return -1;
    char *low = VEC_AT(g->low, char);
    for (Py_ssize_t i = 0; i < n; i++) low[i] = is_upper(t[i]) ? (char)(t[i] + 32) : t[i];
    g->low.n = n;
    /* Sub-words of each '_'-separated segment, as _SUBWORD finds them:
     * [A-Z]+(?=[A-Z][a-z]) | [A-Z]?[a-z]+ | [A-Z]+ | [0-9]+  */
    for (Py_ssize_t i = 0; i < n;) {
        char c = t[i];
        Py_ssize_t j = i + 1;
        if (c == '_') {
            i = j;
            continue;
        }
        if (is_upper(c)) {
            Py_ssize_t run = i;
            while (run < n && is_upper(t[run])) run++;
            if (run - i >= 2 && run < n && is_lower(t[run])) {
                j = run - 1; /* an acronym before a capitalised word: HTTP|Server */
            } else if (run - i == 1 && run < n && is_lower(t[run])) {
                j = run;
                while (j < n && is_lower(t[j])) j++;
            } else {
                j = run;
            }
        } else if (is_lower(c)) {
            while (j < n && is_lower(t[j])) j++;
        } else {
            while (j < n && is_digit(t[j])) j++;
        }
        if (PUSH(g->parts, int64_t, i) < 0 || PUSH(g->parts, int64_t, j) < 0) return -1;
        i = j;
    }
    Py_ssize_t nparts = g->parts.n / 2;
    /* An identifier (several sub-words) is kept verbatim; a plain word is stemmed. */
    int32_t whole;
    if (nparts > 1) {
        whole = is_stopword(g, low, n) ? -1 : term_id(g, low, n);
        if (whole == -1 && PyErr_Occurred()) return -1;
    } else {
        whole = word_term(g, low, n);
        if (whole == -2) return -1;
    }
    if (whole >= 0 && PUSH(g->tterms, int32_t, whole) < 0) return -1;
    if (nparts > 1) {
        for (Py_ssize_t k = 0; k < nparts; k++) {
            /* g->low is not touched by word_term (it copies into g->word). */
            int64_t a = VEC_AT(g->parts, int64_t)[2 * k], b = VEC_AT(g->parts, int64_t)[2 * k + 1];
            int32_t id = word_term(g, VEC_AT(g->low, char) + a, (Py_ssize_t)(b - a));
            if (id == -2) return -1;
            if (id >= 0 && id != whole && PUSH(g->tterms, int32_t, id) < 0) return -1;
        }
    }
    return 0;
}

/* The terms of the token t[0..n), through the token cache: *ids, *count. */
static int cached_terms(Gatherer *g, const char *t, Py_ssize_t n, const int32_t **ids,
                        Py_ssize_t *count) {
    uint64_t h = hash_bytes(t, n);
    uint64_t j = h & g->tokens.mask;
    for (int32_t v; (v = g->tokens.slot[j]) >= 0; j = (j + 1) & g->tokens.mask) {
        if (VEC_AT(g->khash, uint64_t)[v] == h && VEC_AT(g->klen, int32_t)[v] == n &&
            memcmp(VEC_AT(g->kbuf, char) + VEC_AT(g->koff, int64_t)[v], t, (size_t)n) == 0) {
            int64_t s = VEC_AT(g->kstart, int64_t)[v];
            *ids = VEC_AT(g->kids, int32_t) + s;
            *count = (Py_ssize_t)(VEC_AT(g->kstart, int64_t)[v + 1] - s);
            return 0;
        }
    }
    if (token_terms(g, t, n) < 0) return -1;
    if (g->koff.n < TOKEN_CACHE_MAX && n <= 256) {
        int32_t k = (int32_t)g->koff.n;
        if (vec_reserve(&g->kbuf, n, 1) < 0 || PUSH(g->koff, int64_t, g->kbuf.n) < 0 ||
            PUSH(g->klen, int32_t, (int32_t)n) < 0 || PUSH(g->khash, uint64_t, h) < 0 ||
            vec_reserve(&g->kids, g->tterms.n, sizeof(int32_t)) < 0 ||
            PUSH(g->kstart, int64_t, g->kids.n + g->tterms.n) < 0)
            return -1;
        memcpy(VEC_AT(g->kbuf, char) + g->kbuf.n, t, (size_t)n);
        g->kbuf.n += n;
        if (g->tterms.n)
            memcpy(VEC_AT(g->kids, int32_t) + g->kids.n, g->tterms.p,
                   (size_t)g->tterms.n * sizeof(int32_t));
        g->kids.n += g->tterms.n;
        if (table_put(&g->tokens, j, k, stored_hash, g->khash.p) < 0) return -1;
    }
    *ids = VEC_AT(g->tterms, int32_t);
    *count = g->tterms.n;
    return 0;
}

static const unsigned char word_char[128] = {
    ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1,
    ['8'] = 1, ['9'] = 1, ['_'] = 1,
    ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1, ['H'] = 1,
    ['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1, ['O'] = 1, ['P'] = 1,
    ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1, ['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1,
    ['Y'] = 1, ['Z'] = 1,
    ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1,
    ['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1, ['o'] = 1, ['p'] = 1,
    ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1, ['v'] = 1, ['w'] = 1, ['x'] = 1,
    ['y'] = 1, ['z'] = 1,
};

/* End the token t[0..n): append its terms to g->seq, its first to g->firsts. */
static int end_token(Gatherer *g, const char *t, Py_ssize_t n) {
    const int32_t *ids;
    Py_ssize_t count;
    if (cached_terms(g, t, n, &ids, &count) < 0) return -1;
    if (count == 0) return 0;
    if (vec_reserve(&g->seq, count, sizeof(int32_t)) < 0) return -1;
    /* ids may point into g->tterms or g->kids; neither moves until the next token */
    int32_t first = ids[0];
    memcpy(VEC_AT(g->seq, int32_t) + g->seq.n, ids, (size_t)count * sizeof(int32_t));
    g->seq.n += count;
    return PUSH(g->firsts, int32_t, first);
}

#define IS_WORD(c) ((c) < 128 && word_char[(c)])

/* analyze.analyze(text) as term ids in g->seq: words and sub-words, then pairs. */
static int analyze_into(Gatherer *g, PyObject *text, int bigrams) {
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "text must be a str");
        return -1;
    }
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(text) < 0) return -1; /* a legacy string (gone in 3.12) */
#endif
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    g->seq.n = 0;
    g->firsts.n = 0;
    if (kind == PyUnicode_1BYTE_KIND) {
        /* Latin-1 text: word runs are read in place (their bytes are ASCII). */
        const unsigned char *s = data;
        for (Py_ssize_t i = 0; i < n;) {
            while (i < n && !IS_WORD(s[i])) i++;
            Py_ssize_t a = i;
            while (i < n && IS_WORD(s[i])) i++;
            if (i > a && end_token(g, (const char *)s + a, i - a) < 0) return -1;
        }
    } else {
        for (Py_ssize_t i = 0; i < n;) {
            while (i < n && !IS_WORD(PyUnicode_READ(kind, data, i))) i++;
            g->tok.n = 0;
            for (; i < n; i++) {
                Py_UCS4 c = PyUnicode_READ(kind, data, i);
                if (!IS_WORD(c)) break;
                if (PUSH(g->tok, char, (char)c) < 0) return -1;
            }
            if (g->tok.n && end_token(g, VEC_AT(g->tok, char), g->tok.n) < 0) return -1;
        }
    }
    if (bigrams && g->firsts.n > 1) {
        if (vec_reserve(&g->seq, g->firsts.n - 1, sizeof(int32_t)) < 0) return -1;
        for (Py_ssize_t k = 0; k + 1 < g->firsts.n; k++) {
            int32_t id = pair_id(g, VEC_AT(g->firsts, int32_t)[k], VEC_AT(g->firsts, int32_t)[k + 1]);
            if (id < 0) return -1;
            VEC_AT(g->seq, int32_t)[g->seq.n++] = id;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ Python methods */

static PyObject *gatherer_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    static char *names[] = {"stopwords", "lead_terms", "bigrams", NULL};
    PyObject *stopwords;
    int lead_terms, bigrams = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "Oi|p", names, &stopwords, &lead_terms, &bigrams))
        return NULL;
    if (lead_terms < 0) {
        PyErr_SetString(PyExc_ValueError, "lead_terms must be >= 0");
        return NULL;
    }
    Gatherer *g = (Gatherer *)type->tp_alloc(type, 0);
    if (!g) return NULL;
    g->lead_terms = lead_terms;
    g->bigrams = bigrams;
    if (table_init(&g->terms, 1 << 12) < 0 || table_init(&g->pairs, 1 << 12) < 0 ||
        table_init(&g->tokens, 1 << 12) < 0 || table_init(&g->stops, 1 << 9) < 0 ||
        PUSH(g->kstart, int64_t, 0) < 0)
        goto fail;
    PyObject *it = PyObject_GetIter(stopwords);
    if (!it) goto fail;
    PyObject *w;
    while ((w = PyIter_Next(it))) {
        Py_ssize_t len;
        const char *s = PyUnicode_Check(w) ? PyUnicode_AsUTF8AndSize(w, &len) : NULL;
        if (!s && !PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "stopwords must be str");
        int bad = !s || add_stopword(g, s, len) < 0;
        Py_DECREF(w);
        if (bad) {
            Py_DECREF(it);
            goto fail;
        }
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) goto fail;
    return (PyObject *)g;
fail:
    Py_DECREF(g);
    return NULL;
}

static PyObject *term_text(Gatherer *g, int32_t id) {
    return PyUnicode_DecodeASCII(VEC_AT(g->tbuf, char) + VEC_AT(g->toff, int64_t)[id],
                                 VEC_AT(g->tlen, int32_t)[id], NULL);
}

/* analyze(text, bigrams=True) -> list[str]: what analyze.analyze returns. */
static PyObject *gatherer_analyze(Gatherer *g, PyObject *args) {
    PyObject *text;
    int bigrams = 1;
    if (!PyArg_ParseTuple(args, "O|p", &text, &bigrams)) return NULL;
    if (analyze_into(g, text, bigrams) < 0) return NULL;
    PyObject *out = PyList_New(g->seq.n);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < g->seq.n; i++) {
        PyObject *s = term_text(g, VEC_AT(g->seq, int32_t)[i]);
        if (!s) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, s);
    }
    return out;
}

/* section(text, several) -> None: one section of the open record. With `several` its
 * distinct terms and counts (first-seen order) become section rows; its terms count
 * toward the record's body and, the first lead_terms of the record, its lead. */
static PyObject *gatherer_section(Gatherer *g, PyObject *args) {
    PyObject *text;
    int several;
    if (!PyArg_ParseTuple(args, "Op", &text, &several)) return NULL;
    if (analyze_into(g, text, g->bigrams) < 0) return NULL;
    const int32_t *seq = VEC_AT(g->seq, int32_t);
    Py_ssize_t n = g->seq.n;
    int32_t *ssl = VEC_AT(g->sec_slot, int32_t);
    int32_t *rsl = VEC_AT(g->rec_slot, int32_t);
    int32_t *lsl = VEC_AT(g->lead_slot, int32_t);
    if (several) {
        Py_ssize_t base = g->sec_tid.n;
        if (base + n > INT32_MAX) { /* slots are int32 row numbers: never wrap silently */
            PyErr_SetString(PyExc_ValueError, "the search index holds at most 2^31 section rows");
            return NULL;
        }
        if (vec_reserve(&g->sec_tid, n, 4) < 0 || vec_reserve(&g->sec_tf, n, 4) < 0) return NULL;
        int32_t *tid = VEC_AT(g->sec_tid, int32_t), *tf = VEC_AT(g->sec_tf, int32_t);
        Py_ssize_t rows = base;
        for (Py_ssize_t i = 0; i < n; i++) {
            int32_t t = seq[i], k = ssl[t];
            if (k >= base && k < rows && tid[k] == t) {
                tf[k]++;
                continue;
            }
            ssl[t] = (int32_t)rows;
            tid[rows] = t;
            tf[rows++] = 1;
        }
        g->sec_tid.n = g->sec_tf.n = rows;
        if (PUSH(g->sec_n, int64_t, rows - base) < 0) return NULL;
    } else if (PUSH(g->sec_n, int64_t, 0) < 0) {
        return NULL;
    }
    if (PUSH(g->sec_length, int64_t, n) < 0) return NULL;
    if (vec_reserve(&g->r_ids, n, 4) < 0 || vec_reserve(&g->r_tf, n, 4) < 0) return NULL;
    int32_t *r_ids = VEC_AT(g->r_ids, int32_t), *r_tf = VEC_AT(g->r_tf, int32_t);
    Py_ssize_t r_n = g->r_ids.n;
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t t = seq[i], k = rsl[t];
        if (k >= 0 && k < r_n && r_ids[k] == t) {
            r_tf[k]++;
        } else {
            rsl[t] = (int32_t)r_n;
            r_ids[r_n] = t;
            r_tf[r_n++] = 1;
        }
        if (g->l_len < g->lead_terms) {
            g->l_len++;
            k = lsl[t];
            if (k >= 0 && k < g->l_ids.n && VEC_AT(g->l_ids, int32_t)[k] == t) {
                VEC_AT(g->l_tf, int32_t)[k]++;
            } else {
                lsl[t] = (int32_t)g->l_ids.n;
                if (PUSH(g->l_ids, int32_t, t) < 0 || PUSH(g->l_tf, int32_t, 1) < 0) return NULL;
            }
        }
    }
    g->r_ids.n = g->r_tf.n = r_n;
    g->r_len += n;
    Py_RETURN_NONE;
}

/* record(title) -> None: close the open record. Its rows: body terms in first-seen
 * order, then the title's terms the body lacks; each with its title, body and lead
 * count. Then its distinct title terms and its field lengths. */
static PyObject *gatherer_record(Gatherer *g, PyObject *title) {
    if (analyze_into(g, title, g->bigrams) < 0) return NULL;
    const int32_t *seq = VEC_AT(g->seq, int32_t);
    const int32_t *rsl = VEC_AT(g->rec_slot, int32_t), *lsl = VEC_AT(g->lead_slot, int32_t);
    int32_t *tsl = VEC_AT(g->tit_slot, int32_t); /* the title's own slots are set here */
    Py_ssize_t n = g->seq.n;
    const int32_t *r_ids = VEC_AT(g->r_ids, int32_t), *l_ids = VEC_AT(g->l_ids, int32_t);
    Py_ssize_t r_n = g->r_ids.n, l_n = g->l_ids.n;
#define IN_BODY(t) (rsl[t] >= 0 && rsl[t] < r_n && r_ids[rsl[t]] == (t))
#define IN_LEAD(t) (lsl[t] >= 0 && lsl[t] < l_n && l_ids[lsl[t]] == (t))
#define IN_TITLE(t)                                                                      \
    (tsl[t] >= 0 && tsl[t] < tcount.n && VEC_AT(g->title_tid, int32_t)[title_start + tsl[t]] == (t))
    /* The title's distinct terms, counted. */
    vec tcount = {0};
    Py_ssize_t title_start = g->title_tid.n;
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t t = seq[i];
        if (IN_TITLE(t)) {
            VEC_AT(tcount, int32_t)[tsl[t]]++;
            continue;
        }
        tsl[t] = (int32_t)tcount.n;
        if (PUSH(tcount, int32_t, 1) < 0 || PUSH(g->title_tid, int32_t, t) < 0) goto fail;
    }
    Py_ssize_t n_title = g->title_tid.n - title_start;
    const int32_t *title_ids = VEC_AT(g->title_tid, int32_t) + title_start;
    Py_ssize_t rows = r_n;
    for (Py_ssize_t k = 0; k < n_title; k++)
        if (!IN_BODY(title_ids[k])) rows++;
    if (vec_reserve(&g->rec_tid, rows, 4) < 0 || vec_reserve(&g->rec_tf_title, rows, 4) < 0 ||
        vec_reserve(&g->rec_tf_body, rows, 4) < 0 || vec_reserve(&g->rec_tf_lead, rows, 4) < 0)
        goto fail;
    title_ids = VEC_AT(g->title_tid, int32_t) + title_start;
    int32_t *o_tid = VEC_AT(g->rec_tid, int32_t) + g->rec_tid.n;
    int32_t *o_tt = VEC_AT(g->rec_tf_title, int32_t) + g->rec_tf_title.n;
    int32_t *o_tb = VEC_AT(g->rec_tf_body, int32_t) + g->rec_tf_body.n;
    int32_t *o_tl = VEC_AT(g->rec_tf_lead, int32_t) + g->rec_tf_lead.n;
    Py_ssize_t r = 0;
    for (Py_ssize_t k = 0; k < r_n; k++, r++) {
        int32_t t = r_ids[k];
        o_tid[r] = t;
        o_tb[r] = VEC_AT(g->r_tf, int32_t)[k];
        o_tt[r] = IN_TITLE(t) ? VEC_AT(tcount, int32_t)[tsl[t]] : 0;
        o_tl[r] = IN_LEAD(t) ? VEC_AT(g->l_tf, int32_t)[lsl[t]] : 0;
    }
    for (Py_ssize_t k = 0; k < n_title; k++) {
        int32_t t = title_ids[k];
        if (IN_BODY(t)) continue;
        o_tid[r] = t;
        o_tb[r] = 0;
        o_tt[r] = VEC_AT(tcount, int32_t)[tsl[t]];
        o_tl[r] = 0; /* not in the body, so not in its lead */
        r++;
    }
#undef IN_BODY
#undef IN_LEAD
#undef IN_TITLE
    g->rec_tid.n += rows;
    g->rec_tf_title.n += rows;
    g->rec_tf_body.n += rows;
    g->rec_tf_lead.n += rows;
    if (PUSH(g->rec_n, int64_t, rows) < 0 || PUSH(g->title_n, int64_t, n_title) < 0 ||
        PUSH(g->title_len, int64_t, n) < 0 || PUSH(g->body_len, int64_t, g->r_len) < 0 ||
        PUSH(g->lead_len, int64_t, g->l_len) < 0)
        goto fail;
    vec_free(&tcount);
    g->r_ids.n = g->r_tf.n = g->l_ids.n = g->l_tf.n = 0;
    g->r_len = g->l_len = 0;
    Py_RETURN_NONE;
fail:
    vec_free(&tcount);
    return NULL;
}

static const char *sort_buf;
static const int64_t *sort_off;
static const int32_t *sort_len;

static int term_cmp(const void *x, const void *y) {
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    int32_t la = sort_len[a], lb = sort_len[b];
    int c = memcmp(sort_buf + sort_off[a], sort_buf + sort_off[b], (size_t)(la < lb ? la : lb));
    if (c) return c;
    return (la > lb) - (la < lb);
}

static PyObject *bytes_of(const vec *v, size_t item) {
    return PyBytes_FromStringAndSize((const char *)v->p, v->n * (Py_ssize_t)item);
}

/* finish() -> dict[str, bytes]: the vocabulary sorted (`term_blob`, `term_off` as
 * int64), `rank` (int32: each term id's place in it) and every row buffer. */
static PyObject *gatherer_finish(Gatherer *g, PyObject *unused) {
    (void)unused;
    Py_ssize_t nt = g->toff.n;
    int32_t *order = PyMem_Malloc((size_t)(nt ? nt : 1) * sizeof(int32_t));
    int32_t *rank = PyMem_Malloc((size_t)(nt ? nt : 1) * sizeof(int32_t));
    int64_t *off = PyMem_Malloc((size_t)(nt + 1) * sizeof(int64_t));
    char *blob = PyMem_Malloc((size_t)(g->tbuf.n ? g->tbuf.n : 1));
    PyObject *out = NULL;
    if (!order || !rank || !off || !blob) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < nt; i++) order[i] = (int32_t)i;
    /* The vocabulary is ASCII, so byte order is Python's str order; terms are unique,
     * so any sort gives the one order (the GIL guards the comparison's globals). */
    sort_buf = VEC_AT(g->tbuf, char);
    sort_off = VEC_AT(g->toff, int64_t);
    sort_len = VEC_AT(g->tlen, int32_t);
    qsort(order, (size_t)nt, sizeof(int32_t), term_cmp);
    int64_t pos = 0;
    off[0] = 0;
    for (Py_ssize_t i = 0; i < nt; i++) {
        int32_t t = order[i];
        rank[t] = (int32_t)i;
        int32_t len = sort_len[t];
        memcpy(blob + pos, sort_buf + sort_off[t], (size_t)len);
        pos += len;
        off[i + 1] = pos;
    }
    out = Py_BuildValue(
        "{s:y#,s:y#,s:y#,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N}",
        "term_blob", blob, (Py_ssize_t)pos, "term_off", (const char *)off,
        (Py_ssize_t)((nt + 1) * 8), "rank", (const char *)rank, (Py_ssize_t)(nt * 4),
        "r.tid", bytes_of(&g->rec_tid, 4), "r.tf_title", bytes_of(&g->rec_tf_title, 4),
        "r.tf_body", bytes_of(&g->rec_tf_body, 4), "r.tf_lead", bytes_of(&g->rec_tf_lead, 4),
        "r.n", bytes_of(&g->rec_n, 8), "r.title_tid", bytes_of(&g->title_tid, 4),
        "r.title_n", bytes_of(&g->title_n, 8), "r.title_len", bytes_of(&g->title_len, 8),
        "r.body_len", bytes_of(&g->body_len, 8), "r.lead_len", bytes_of(&g->lead_len, 8),
        "s.tid", bytes_of(&g->sec_tid, 4), "s.tf", bytes_of(&g->sec_tf, 4),
        "s.n", bytes_of(&g->sec_n, 8), "s.length", bytes_of(&g->sec_length, 8));
done:
    PyMem_Free(order);
    PyMem_Free(rank);
    PyMem_Free(off);
    PyMem_Free(blob);
    return out;
}

static PyMethodDef gatherer_methods[] = {
    {"analyze", (PyCFunction)gatherer_analyze, METH_VARARGS,
     "analyze(text, bigrams=True) -> list[str]: analyze.analyze's terms of text."},
    {"section", (PyCFunction)gatherer_section, METH_VARARGS,
     "section(text, several) -> None: add one section to the open record."},
    {"record", (PyCFunction)gatherer_record, METH_O,
     "record(title) -> None: close the open record."},
    {"finish", (PyCFunction)gatherer_finish, METH_NOARGS,
     "finish() -> dict[str, bytes]: the sorted vocabulary, ranks and row buffers."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject GathererType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_analyzefast.Gatherer",
    .tp_basicsize = sizeof(Gatherer),
    .tp_dealloc = (destructor)gatherer_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Gatherer(stopwords, lead_terms): the default ranking's rows, analysed in C.",
    .tp_methods = gatherer_methods,
    .tp_new = gatherer_new,
};

/* term_order(tids, n_terms) -> bytes: int64 positions of `tids` (int32 in [0, n_terms))
 * sorted by term, stably: numpy's argsort(kind="stable"), as a counting sort (linear,
 * where a comparison sort of millions of postings is not). */
static PyObject *term_order(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer buf;
    Py_ssize_t n_terms;
    if (!PyArg_ParseTuple(args, "y*n", &buf, &n_terms)) return NULL;
    PyObject *out = NULL;
    int64_t *start = NULL;
    Py_ssize_t n = buf.len / (Py_ssize_t)sizeof(int32_t);
    const int32_t *tids = buf.buf;
    if (buf.len % (Py_ssize_t)sizeof(int32_t) || n_terms < 0) {
        PyErr_SetString(PyExc_ValueError, "tids must be int32 and n_terms >= 0");
        goto done;
    }
    start = PyMem_Calloc((size_t)n_terms + 1, sizeof(int64_t));
    if (!start) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (tids[i] < 0 || tids[i] >= n_terms) {
            PyErr_SetString(PyExc_ValueError, "a term id is out of range");
            goto done;
        }
        start[tids[i] + 1]++;
    }
    for (Py_ssize_t t = 0; t < n_terms; t++) start[t + 1] += start[t];
    out = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int64_t));
    if (!out) goto done;
    int64_t *order = (int64_t *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) order[start[tids[i]]++] = i;
done:
    PyMem_Free(start);
    PyBuffer_Release(&buf);
    return out;
}

static PyMethodDef module_methods[] = {
    {"term_order", term_order, METH_VARARGS,
     "term_order(tids, n_terms) -> bytes: int64 stable order of int32 tids by term."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_analyzefast",
    "Native text analysis for the search-index build (optional).", -1, module_methods,
};

#ifndef NATIVE_SOURCE_SHA256
#define NATIVE_SOURCE_SHA256 ""
#endif

PyMODINIT_FUNC PyInit__analyzefast(void) {
    if (PyType_Ready(&GathererType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&GathererType);
    if (PyModule_AddObject(m, "Gatherer", (PyObject *)&GathererType) < 0 ||
        PyModule_AddStringConstant(m, "SOURCE_SHA256", NATIVE_SOURCE_SHA256) < 0) {
        Py_DECREF(&GathererType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
