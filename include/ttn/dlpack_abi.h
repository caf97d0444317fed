/* The part of the DLPack 1.x ABI (https://dmlc.github.io/dlpack/) the
 * virtual NPU uses to alias host memory between the cpu and npu devices.
 *
 * Declared here rather than taken from torch's headers because torch is not
 * present when the extension is built.  The layouts are fixed by the DLPack
 * standard; the exchange table is checked against its version at run time.
 */
#ifndef TTN_DLPACK_ABI_H
#define TTN_DLPACK_ABI_H

#include <stdint.h>

#define TTN_DLPACK_MAJOR 1

typedef struct {
    uint32_t major;
    uint32_t minor;
} ttn_DLPackVersion;

enum {
    ttn_kDLCPU = 1,
    ttn_kDLExtDev = 12 /* torch maps it to the PrivateUse1 device ("npu") */
};

typedef struct {
    int32_t device_type;
    int32_t device_id;
} ttn_DLDevice;

typedef struct {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} ttn_DLDataType;

typedef struct {
    void *data;
    ttn_DLDevice device;
    int32_t ndim;
    ttn_DLDataType dtype;
    int64_t *shape;
    int64_t *strides;
    uint64_t byte_offset;
} ttn_DLTensor;

typedef struct ttn_DLManagedTensorVersioned {
    ttn_DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct ttn_DLManagedTensorVersioned *self);
    uint64_t flags;
    ttn_DLTensor dl_tensor;
} ttn_DLManagedTensorVersioned;

typedef struct ttn_DLPackExchangeAPIHeader {
    ttn_DLPackVersion version;
    struct ttn_DLPackExchangeAPIHeader *prev_api;
} ttn_DLPackExchangeAPIHeader;

/* The C function table a framework publishes as the "dlpack_exchange_api"
 * capsule: conversions between its tensor objects and DLPack without going
 * through Python calls. */
typedef struct ttn_DLPackExchangeAPI {
    ttn_DLPackExchangeAPIHeader header;
    int (*managed_tensor_allocator)(ttn_DLTensor *prototype,
                                    ttn_DLManagedTensorVersioned **out,
                                    void *error_ctx,
                                    void (*set_error)(void *, const char *, const char *));
    int (*managed_tensor_from_py_object_no_sync)(void *py_object,
                                                 ttn_DLManagedTensorVersioned **out);
    int (*managed_tensor_to_py_object_no_sync)(ttn_DLManagedTensorVersioned *tensor,
                                               void **out_py_object);
    int (*dltensor_from_py_object_no_sync)(void *py_object, ttn_DLTensor *out);
    int (*current_work_stream)(int32_t device_type, int32_t device_id, void **out_stream);
} ttn_DLPackExchangeAPI;

#endif
