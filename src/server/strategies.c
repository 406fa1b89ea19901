/* The strategies a server offers (docs/protocol.md, "Strategies"): "hma" always, then every
 * --strategy (a built-in name or a plugin path), resolved once at start. A plugin that cannot be
 * loaded keeps the server from starting; requests only ever look names up. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

static int add(srv *s, const tf_strategy_def *def, tf_strategy_lib *lib, const char *what,
               char *msg, size_t cap)
{
    for (int i = 0; i < s->n_strat; i++)
        if (!strcmp(s->strat[i]->name, def->name)) {
            snprintf(msg, cap, "--strategy %s: a strategy named '%s' is offered already", what,
                     def->name);
            tf_strategy_unload(lib);
            return TF_E_STRATEGY;
        }
    s->strat[s->n_strat] = def;
    s->strat_lib[s->n_strat] = lib;
    s->n_strat++;
    return 0;
}

int srv_strategies_init(srv *s, char *msg, size_t cap)
{
    const tf_strategy_def *hma = tf_strategy_builtin("hma");
    if (!hma) {
        snprintf(msg, cap, "the built-in strategy 'hma' is missing");
        return TF_E_STRATEGY;
    }
    int rc = add(s, hma, NULL, "hma", msg, cap);
    for (int i = 0; !rc && i < s->cfg.n_strategies; i++) {
        const char *arg = s->cfg.strategies[i];
        const tf_strategy_def *def = NULL;
        tf_strategy_lib *lib = NULL;
        char why[512] = "";
        rc = tf_strategy_resolve(arg, &def, &lib, why, sizeof why);
        if (rc) {
            snprintf(msg, cap, "--strategy %s: %s", arg, why[0] ? why : tf_strerror(rc));
            break;
        }
        if (strlen(def->name) > TF_WIRE_MAX_NAME) {
            snprintf(msg, cap, "--strategy %s: its name is longer than %d bytes", arg,
                     TF_WIRE_MAX_NAME);
            tf_strategy_unload(lib);
            rc = TF_E_STRATEGY;
            break;
        }
        rc = add(s, def, lib, arg, msg, cap);
    }
    if (rc)
        return rc;
    /* The STRATEGIES reply: one line per strategy, its name and its parameter names. */
    size_t len = 0;
    for (int i = 0; i < s->n_strat; i++) {
        len += strlen(s->strat[i]->name) + 1;
        for (uint32_t k = 0; k < s->strat[i]->n_params; k++)
            len += strlen(s->strat[i]->param_names[k]) + 1;
    }
    if (len > ((size_t)64 << 10)) {
        snprintf(msg, cap, "the names of the strategies take more than 64 KiB");
        return TF_E_STRATEGY;
    }
    if (!(s->strat_text = malloc(len + 1))) {
        snprintf(msg, cap, "no memory for the list of strategies");
        return TF_E_NOMEM;
    }
    char *p = s->strat_text;
    for (int i = 0; i < s->n_strat; i++) {
        p += sprintf(p, "%s", s->strat[i]->name);
        for (uint32_t k = 0; k < s->strat[i]->n_params; k++)
            p += sprintf(p, " %s", s->strat[i]->param_names[k]);
        *p++ = '\n';
    }
    s->strat_text_len = (uint32_t)(p - s->strat_text);
    return 0;
}

void srv_strategies_fini(srv *s)
{
    for (int i = 0; i < s->n_strat; i++)
        tf_strategy_unload(s->strat_lib[i]);
    s->n_strat = 0;
    free(s->strat_text);
    s->strat_text = NULL;
}

const tf_strategy_def *srv_strategy_find(const srv *s, const char *name, size_t name_len)
{
    for (int i = 0; i < s->n_strat; i++)
        if (strlen(s->strat[i]->name) == name_len && !memcmp(s->strat[i]->name, name, name_len))
            return s->strat[i];
    return NULL;
}

void srv_strategy_names(const srv *s, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = 0;
    for (int i = 0; i < s->n_strat && n + 1 < cap; i++) {
        int w = snprintf(out + n, cap - n, "%s%s", i ? ", " : "", s->strat[i]->name);
        if (w < 0)
            break;
        n += (size_t)w;
    }
}
