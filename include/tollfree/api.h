/* Symbol visibility for the public API: libtollfree.so exports only what is marked TF_API. */
#ifndef TOLLFREE_API_H
#define TOLLFREE_API_H

#if defined(__GNUC__)
#define TF_API __attribute__((visibility("default")))
#else
#define TF_API
#endif

#endif
