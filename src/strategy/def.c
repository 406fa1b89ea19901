/* Finding a strategy: the built-ins, the contract's check, plugins, names, and the params check. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/msg.h"
#include "strategy_internal.h"

static const tf_strategy_def *const builtins[] = {
    &tfk_hma_def, &tfs_sma_cross, &tfs_ema_cross, &tfs_donchian, &tfs_rsi, &tfs_bollinger,
};
#define N_BUILTINS ((int)(sizeof builtins / sizeof builtins[0]))

const tf_strategy_def *tf_strategy_builtin(const char *name)
{
    if (!name)
        return NULL;
    for (int i = 0; i < N_BUILTINS; i++)
        if (strcmp(builtins[i]->name, name) == 0)
            return builtins[i];
    return NULL;
}

const char *tf_strategy_builtin_name(int i)
{
    return i >= 0 && i < N_BUILTINS ? builtins[i]->name : NULL;
}

static int is_builtin(const tf_strategy_def *def)
{
    for (int i = 0; i < N_BUILTINS; i++)
        if (builtins[i] == def)
            return 1;
    return 0;
}

/* [a-z0-9_]+ */
static int name_ok(const char *s)
{
    if (!s || !*s)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
            return 0;
    return 1;
}

/* The bytes of every member ABI 1 requires: up to and including state_bytes. */
#define DEF_MIN_SIZE (offsetof(tf_strategy_def, state_bytes) + sizeof(void (*)(void)))

int tf_strategy_def_check(const tf_strategy_def *def, char *msg, size_t msg_cap)
{
    if (!def)
        return tfu_msg(TF_E_STRATEGY, msg, msg_cap, "no strategy definition (NULL)");
    /* The built-ins are the library's own; HMA's first parameter keeps its name L. */
    if (is_builtin(def))
        return 0;
    if (def->size < offsetof(tf_strategy_def, abi) + sizeof def->abi)
        return tfu_msg(TF_E_STRATEGY, msg, msg_cap,
                       "definition size %zu is smaller than the %zu bytes ABI %d requires",
                       def->size, (size_t)DEF_MIN_SIZE, TF_STRATEGY_ABI);
    if (def->abi != TF_STRATEGY_ABI)
        return tfu_msg(TF_E_STRATEGY, msg, msg_cap,
                       "built for strategy ABI %u; this library speaks ABI %d (rebuild it against "
                       "this tollfree/strategy.h)",
                       def->abi, TF_STRATEGY_ABI);
    if (def->size < DEF_MIN_SIZE)
        return tfu_msg(TF_E_STRATEGY, msg, msg_cap,
                       "definition size %zu is smaller than the %zu bytes ABI %d requires",
                       def->size, (size_t)DEF_MIN_SIZE, TF_STRATEGY_ABI);
    if (!name_ok(def->name))
        return tfu_msg(TF_E_STRATEGY, msg, msg_cap, "bad strategy name \"%s\" (wanted [a-z0-9_]+)",
                       def->name ? def->name : "");
    if (def->n_params < 1 || def->n_params > TF_STRATEGY_MAX_PARAMS)
        return tfu_msg(TF_E_STRATEGY, msg, msg_cap, "strategy %s: %u parameters (wanted 1..%d)",
                       def->name, def->n_params, TF_STRATEGY_MAX_PARAMS);
    if (!def->param_names)
        return tfu_msg(TF_E_STRATEGY, msg, msg_cap, "strategy %s: no parameter names (NULL)",
                       def->name);
    for (uint32_t k = 0; k < def->n_params; k++) {
        const char *pk = def->param_names[k];
        if (!name_ok(pk))
            return tfu_msg(TF_E_STRATEGY, msg, msg_cap,
                           "strategy %s: bad name \"%s\" for parameter %u (wanted [a-z0-9_]+)",
                           def->name, pk ? pk : "", k);
        for (uint32_t q = 0; q < k; q++)
            if (strcmp(def->param_names[q], pk) == 0)
                return tfu_msg(TF_E_STRATEGY, msg, msg_cap,
                               "strategy %s: parameter name \"%s\" given twice", def->name, pk);
    }
    if (!def->init)
        return tfu_msg(TF_E_STRATEGY, msg, msg_cap, "strategy %s: no init function", def->name);
    if (!def->step)
        return tfu_msg(TF_E_STRATEGY, msg, msg_cap, "strategy %s: no step function", def->name);
    if (!def->state_bytes && def->state_size == 0)
        return tfu_msg(TF_E_STRATEGY, msg, msg_cap,
                       "strategy %s: zero state (state_size 0 and no state_bytes)", def->name);
    if (!def->state_bytes && def->state_size > TFK_MAX_STATE)
        return tfu_msg(TF_E_STRATEGY, msg, msg_cap,
                       "strategy %s: state_size %zu is more than the %zu bytes allowed", def->name,
                       def->state_size, TFK_MAX_STATE);
    if (def->size >= offsetof(tf_strategy_def, changes) + sizeof def->changes && def->changes &&
        (def->lanes < 1 || def->lanes > TF_STRATEGY_MAX_LANES))
        return tfu_msg(TF_E_STRATEGY, msg, msg_cap,
                       "strategy %s: changes with lanes %u (wanted 1..%d)", def->name, def->lanes,
                       TF_STRATEGY_MAX_LANES);
    return 0;
}

struct tf_strategy_lib {
    void *handle;
    const tf_strategy_def *def;
};

int tf_strategy_load(const char *path, tf_strategy_lib **out, char *msg, size_t msg_cap)
{
    if (!path || !out)
        return tfu_msg(TF_E_NULL_ARG, msg, msg_cap, "tf_strategy_load: NULL path or out");
    dlerror();
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        return tfu_msg(TF_E_STRATEGY, msg, msg_cap, "%s: cannot open the strategy plugin: %s", path,
                       why ? why : "unknown reason");
    }
    dlerror();
    void *sym = dlsym(h, TF_STRATEGY_SYMBOL);
    if (!sym) {
        dlclose(h);
        return tfu_msg(TF_E_STRATEGY, msg, msg_cap,
                       "%s: not a tollfree strategy plugin: no symbol %s (export `const "
                       "tf_strategy_def *%s(void)`)",
                       path, TF_STRATEGY_SYMBOL, TF_STRATEGY_SYMBOL);
    }
    tf_strategy_entry entry;
    memcpy(&entry, &sym, sizeof entry); /* ISO C has no object-to-function pointer cast */
    const tf_strategy_def *def = entry();
    if (!def) {
        dlclose(h);
        return tfu_msg(TF_E_STRATEGY, msg, msg_cap, "%s: %s() returned NULL", path,
                       TF_STRATEGY_SYMBOL);
    }
    char why[384];
    if (tf_strategy_def_check(def, why, sizeof why)) {
        dlclose(h);
        return tfu_msg(TF_E_STRATEGY, msg, msg_cap, "%s: %s", path, why);
    }
    tf_strategy_lib *lib = malloc(sizeof *lib);
    if (!lib) {
        dlclose(h);
        return tfu_msg(TF_E_NOMEM, msg, msg_cap, "%s: out of memory", path);
    }
    lib->handle = h;
    lib->def = def;
    *out = lib;
    return 0;
}

const tf_strategy_def *tf_strategy_lib_def(const tf_strategy_lib *lib)
{
    return lib ? lib->def : NULL;
}

void tf_strategy_unload(tf_strategy_lib *lib)
{
    if (!lib)
        return;
    dlclose(lib->handle);
    free(lib);
}

static int looks_like_path(const char *s)
{
    size_t n = strlen(s);
    return strchr(s, '/') != NULL || (n >= 3 && strcmp(s + n - 3, ".so") == 0);
}

int tf_strategy_resolve(const char *name_or_path, const tf_strategy_def **def,
                        tf_strategy_lib **lib, char *msg, size_t msg_cap)
{
    if (!name_or_path || !def || !lib)
        return tfu_msg(TF_E_NULL_ARG, msg, msg_cap, "tf_strategy_resolve: NULL argument");
    *lib = NULL;
    const tf_strategy_def *b = tf_strategy_builtin(name_or_path);
    if (b) {
        *def = b;
        return 0;
    }
    if (looks_like_path(name_or_path)) {
        tf_strategy_lib *l = NULL;
        int rc = tf_strategy_load(name_or_path, &l, msg, msg_cap);
        if (rc)
            return rc;
        *def = l->def;
        *lib = l;
        return 0;
    }
    char known[256];
    size_t at = 0;
    known[0] = '\0';
    for (int i = 0; i < N_BUILTINS; i++)
        at += (size_t)snprintf(known + at, sizeof known - at, "%s%s", i ? ", " : "",
                               builtins[i]->name);
    return tfu_msg(TF_E_STRATEGY, msg, msg_cap,
                   "unknown strategy \"%s\" (built-ins: %s; or a plugin path like ./my.so)",
                   name_or_path, known);
}

/* "fast=5, slow=5" for combo params[n]. */
static void format_combo(const tf_strategy_def *def, const double *p, char *buf, size_t cap)
{
    size_t at = 0;
    buf[0] = '\0';
    for (uint32_t k = 0; k < def->n_params && at < cap; k++) {
        int w =
            snprintf(buf + at, cap - at, "%s%s=%.17g", k ? ", " : "", def->param_names[k], p[k]);
        if (w < 0)
            break;
        at += (size_t)w;
    }
}

/* A 16-byte aligned block of at least bytes (a multiple of 16), reused while big enough. */
static void *grow(void **buf, size_t *cap, size_t bytes)
{
    if (bytes > *cap) {
        free(*buf);
        *buf = aligned_alloc(16, bytes);
        *cap = *buf ? bytes : 0;
    }
    return *buf;
}

int tf_strategy_params_check(const tf_strategy_def *def, const double *params, int64_t n_combos,
                             int64_t *bad_combo, char *msg, size_t msg_cap)
{
    int rc = tf_strategy_def_check(def, msg, msg_cap);
    if (rc)
        return rc;
    if (n_combos < 0 || n_combos > TF_MAX_COMBOS)
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap, "strategy %s: %lld combos (wanted 0..%lld)",
                       def->name, (long long)n_combos, (long long)TF_MAX_COMBOS);
    if (n_combos > 0 && !params)
        return tfu_msg(TF_E_NULL_ARG, msg, msg_cap, "strategy %s: NULL params", def->name);
    void *state = NULL;
    size_t cap = 0;
    rc = 0;
    for (int64_t j = 0; j < n_combos && !rc; j++) {
        const double *p = params + j * (int64_t)def->n_params;
        size_t bytes = tfk_state_bytes(def, p);
        const char *why = NULL;
        if (!bytes)
            why = "asks for more than 1 GiB of state";
        else if (!grow(&state, &cap, bytes))
            rc = tfu_msg(TF_E_NOMEM, msg, msg_cap,
                         "strategy %s: out of memory for a state of %zu bytes", def->name, bytes);
        else {
            memset(state, 0, bytes);
            if (def->init(state, p))
                why = "is refused by the strategy's init (invalid parameters)";
        }
        if (why) {
            char combo[512];
            format_combo(def, p, combo, sizeof combo);
            if (bad_combo)
                *bad_combo = j;
            rc = tfu_msg(TF_E_STRATEGY, msg, msg_cap, "strategy %s: combo %lld (%s) %s", def->name,
                         (long long)j, combo, why);
        }
    }
    free(state);
    return rc;
}
