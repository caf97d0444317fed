/* The accuracy tools' C parts (the dump's statistics). */
#ifndef TTN_ACCURACY_H
#define TTN_ACCURACY_H

#include "state.h"

/* stats_glue.c */
extern PyMethodDef ttn_stats_methods[];
int ttn_stats_add_constants(PyObject *module);

#endif
