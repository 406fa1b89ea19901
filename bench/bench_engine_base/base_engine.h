/* The frozen engine of bench_engine_base/ as bench_engine calls it: the public engine API of
 * before issue 24 under base_ names, on its own engine type. */
#ifndef BASE_ENGINE_H
#define BASE_ENGINE_H

#include "tollfree/engine.h"

typedef struct base_engine base_engine;

int base_engine_create(const tf_engine_config *cfg, base_engine **out);
void base_engine_destroy(base_engine *e);
int base_engine_apply(base_engine *e, const tf_ofl_msg *cmd, tf_engine_sink *sink);
uint64_t base_engine_state_hash(const base_engine *e);
void base_engine_get_counters(const base_engine *e, tf_engine_counters *out);

#endif
