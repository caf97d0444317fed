/* The virtual NPU's own interfaces between its files (host aliases, the
 * generic kernel, Tensor.npu and the current device, what torch's C++
 * calls back).  The patcher never includes this. */
#ifndef TTN_VIRTUAL_H
#define TTN_VIRTUAL_H

#include "state.h"

/* host_alias.c */
PyObject *ttn_host_alias(ttn_state *st, PyObject *tensor);
PyObject *ttn_device_alias(ttn_state *st, PyObject *tensor, int index, int account);
int ttn_tensor_device(ttn_state *st, PyObject *tensor, int *type, int *index);
int ttn_ensure_kernels(ttn_state *st);
int ttn_index_arg(PyObject *arg, int *index);
/* -1 with RuntimeError ("Invalid device ordinal") unless npu:index exists. */
int ttn_check_device_index(ttn_state *st, long index);
extern PyMethodDef ttn_host_alias_methods[];

/* host_call.c */
extern PyMethodDef ttn_host_call_methods[];

/* callbacks.c */
extern PyType_Spec ttn_constant_spec;
/* Around a callback of torch's C++ that may run Python code (a kernel):
 * Ctrl-C is held until the outermost one is left. */
void ttn_callback_enter(void);
void ttn_callback_leave(void);
extern PyMethodDef ttn_callbacks_methods[];

/* npu_method.c */
/* Most keywords a quick Tensor.npu() passes on (non_blocking,
 * memory_format), plus the tensor and the device. */
#define TTN_NPU_METHOD_ARGS 4
int ttn_set_current_device(ttn_state *st, int index);
extern PyType_Spec ttn_npu_method_spec;
extern PyMethodDef ttn_npu_method_methods[];


#endif
