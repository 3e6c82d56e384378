/* A fake libnvidia-ml.so.1 for tests: the NVML entry points the checker (and
 * torch) call, answering from a key=value file named by FAKE_NVML_CONFIG.
 *
 * Return codes and nvmlErrorString texts are NVML's own (nvml.h), so the
 * checker's ctypes code runs unchanged against it. Keys (all optional):
 *   init_error=18                  nvmlInit* returns this NVML_ERROR_* code
 *   count_error=4                  nvmlDeviceGetCount* returns this code
 *   driver_version=580.95.05
 *   cuda_driver_version=13000      as nvmlSystemGetCudaDriverVersion: 1000*major + 10*minor
 *   device_count=4
 *   device.N.name=NVIDIA H100 80GB HBM3
 *   device.N.uuid=GPU-...
 *   device.N.capability=9.0
 *   device.N.memory_total=85520809984   bytes
 *   device.N.handle_error=4         nvmlDeviceGetHandleByIndex_v2(N) returns this code
 *   device.N.mig_mode=1             0/1; absent: NVML_ERROR_NOT_SUPPORTED
 *   device.N.mig.M.uuid=MIG-...     MIG instance M of device N (needs mig_mode=1)
 * Text values may hold %XX escapes (a byte in hex), so a test can put ESC, newlines or any byte
 * in a device name. device_count may exceed MAX_DEVICES: indices beyond it reuse the entries
 * modulo MAX_DEVICES, as a driver reporting a huge count would still hand out handles.
 * The file is read by nvmlInit*; nothing is written anywhere.
 *
 * Faults, chosen by the environment variable FAKE_NVML_MODE (read when they would happen):
 *   segv-init          nvmlInit* dereferences NULL (SIGSEGV), as a driver/library mismatch can
 *   hang-init          nvmlInit* never returns (sleeps forever, as on a wedged GPU)
 *   spin-constructor   the library's constructor spins forever: dlopen itself never returns
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_DEVICES 16
#define MAX_MIG 8
#define TEXT 96

enum {
    NVML_SUCCESS = 0, NVML_ERROR_UNINITIALIZED = 1, NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3, NVML_ERROR_NO_PERMISSION = 4, NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7, NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18, NVML_ERROR_UNKNOWN = 999
};

typedef struct { unsigned long long total, free, used; } nvmlMemory_t;

struct fake_mig { int present; char uuid[TEXT]; };

struct fake_device {
    char name[TEXT], uuid[TEXT];
    int major, minor, handle_error, mig_mode;  /* mig_mode -1: not supported */
    unsigned long long memory_total;
    struct fake_mig mig[MAX_MIG];
    int is_mig;  /* this handle is a MIG instance */
};

static struct {
    int initialised, init_error, count_error, cuda_driver_version;
    unsigned device_count;
    char driver_version[TEXT];
    struct fake_device devices[MAX_DEVICES];
    struct fake_device mig_handles[MAX_DEVICES][MAX_MIG];
} fake;

static void copy_text(char *to, const char *from) {
    size_t n = 0;
    while (*from != '\0' && n < TEXT - 1) {
        unsigned byte;
        if (from[0] == '%' && sscanf(from + 1, "%2x", &byte) == 1 && from[1] && from[2]) {
            to[n++] = (char)byte;
            from += 3;
        } else {
            to[n++] = *from++;
        }
    }
    to[n] = '\0';
}

static int mode_is(const char *mode) {
    const char *value = getenv("FAKE_NVML_MODE");
    return value != NULL && strcmp(value, mode) == 0;
}

__attribute__((constructor)) static void on_load(void) {
    if (mode_is("spin-constructor"))
        for (volatile unsigned long n = 0;; n++) {}
}

static void read_config(void) {
    const char *path = getenv("FAKE_NVML_CONFIG");
    char line[512];
    FILE *file;
    memset(&fake, 0, sizeof fake);
    for (int i = 0; i < MAX_DEVICES; i++) fake.devices[i].mig_mode = -1;
    if (path == NULL || (file = fopen(path, "r")) == NULL) return;
    while (fgets(line, sizeof line, file) != NULL) {
        char *value = strchr(line, '='), *end;
        int n, m, used;
        if (value == NULL) continue;
        *value++ = '\0';
        if ((end = strpbrk(value, "\r\n")) != NULL) *end = '\0';
        if (strcmp(line, "init_error") == 0) fake.init_error = atoi(value);
        else if (strcmp(line, "count_error") == 0) fake.count_error = atoi(value);
        else if (strcmp(line, "driver_version") == 0) copy_text(fake.driver_version, value);
        else if (strcmp(line, "cuda_driver_version") == 0) fake.cuda_driver_version = atoi(value);
        else if (strcmp(line, "device_count") == 0) fake.device_count = (unsigned)atoi(value);
        else if (sscanf(line, "device.%d.mig.%d.uuid%n", &n, &m, &used) == 2 && line[used] == '\0'
                 && n >= 0 && n < MAX_DEVICES && m >= 0 && m < MAX_MIG) {
            fake.devices[n].mig[m].present = 1;
            copy_text(fake.devices[n].mig[m].uuid, value);
        } else if (sscanf(line, "device.%d.%n", &n, &used) == 1 && n >= 0 && n < MAX_DEVICES) {
            struct fake_device *device = &fake.devices[n];
            const char *key = line + used;
            if (strcmp(key, "name") == 0) copy_text(device->name, value);
            else if (strcmp(key, "uuid") == 0) copy_text(device->uuid, value);
            else if (strcmp(key, "capability") == 0) sscanf(value, "%d.%d", &device->major, &device->minor);
            else if (strcmp(key, "memory_total") == 0) device->memory_total = strtoull(value, NULL, 10);
            else if (strcmp(key, "handle_error") == 0) device->handle_error = atoi(value);
            else if (strcmp(key, "mig_mode") == 0) device->mig_mode = atoi(value);
        }
    }
    fclose(file);
}

static int init(void) {
    if (mode_is("segv-init")) *(volatile int *)0 = 1;
    if (mode_is("hang-init")) for (;;) pause();
    read_config();
    if (fake.init_error != 0) return fake.init_error;
    fake.initialised = 1;
    return NVML_SUCCESS;
}

int nvmlInit_v2(void) { return init(); }
int nvmlInit(void) { return init(); }
int nvmlInitWithFlags(unsigned flags) { (void)flags; return init(); }

int nvmlShutdown(void) {
    if (!fake.initialised) return NVML_ERROR_UNINITIALIZED;
    fake.initialised = 0;
    return NVML_SUCCESS;
}

const char *nvmlErrorString(int result) {
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "Driver/library version mismatch";
    default: return "Unknown Error";
    }
}

static int put_text(char *buffer, unsigned length, const char *text) {
    if (buffer == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(text) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(buffer, text);
    return NVML_SUCCESS;
}

int nvmlSystemGetDriverVersion(char *version, unsigned length) {
    if (!fake.initialised) return NVML_ERROR_UNINITIALIZED;
    return put_text(version, length, fake.driver_version);
}

int nvmlSystemGetCudaDriverVersion(int *version) {
    if (!fake.initialised) return NVML_ERROR_UNINITIALIZED;
    if (version == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (fake.cuda_driver_version == 0) return NVML_ERROR_UNKNOWN;
    *version = fake.cuda_driver_version;
    return NVML_SUCCESS;
}

int nvmlSystemGetCudaDriverVersion_v2(int *version) { return nvmlSystemGetCudaDriverVersion(version); }

int nvmlDeviceGetCount_v2(unsigned *count) {
    if (!fake.initialised) return NVML_ERROR_UNINITIALIZED;
    if (count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (fake.count_error != 0) return fake.count_error;
    *count = fake.device_count;
    return NVML_SUCCESS;
}

int nvmlDeviceGetCount(unsigned *count) { return nvmlDeviceGetCount_v2(count); }

int nvmlDeviceGetHandleByIndex_v2(unsigned index, struct fake_device **device) {
    if (!fake.initialised) return NVML_ERROR_UNINITIALIZED;
    if (device == NULL || index >= fake.device_count) return NVML_ERROR_INVALID_ARGUMENT;
    index %= MAX_DEVICES;
    if (fake.devices[index].handle_error != 0) return fake.devices[index].handle_error;
    *device = &fake.devices[index];
    return NVML_SUCCESS;
}

int nvmlDeviceGetHandleByIndex(unsigned index, struct fake_device **device) {
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

int nvmlDeviceGetName(struct fake_device *device, char *name, unsigned length) {
    if (!fake.initialised) return NVML_ERROR_UNINITIALIZED;
    if (device == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    return put_text(name, length, device->name);
}

int nvmlDeviceGetUUID(struct fake_device *device, char *uuid, unsigned length) {
    if (!fake.initialised) return NVML_ERROR_UNINITIALIZED;
    if (device == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    return put_text(uuid, length, device->uuid);
}

int nvmlDeviceGetCudaComputeCapability(struct fake_device *device, int *major, int *minor) {
    if (!fake.initialised) return NVML_ERROR_UNINITIALIZED;
    if (device == NULL || major == NULL || minor == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *major = device->major;
    *minor = device->minor;
    return NVML_SUCCESS;
}

int nvmlDeviceGetMemoryInfo(struct fake_device *device, nvmlMemory_t *memory) {
    if (!fake.initialised) return NVML_ERROR_UNINITIALIZED;
    if (device == NULL || memory == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    memory->total = device->memory_total;
    memory->used = 0;
    memory->free = device->memory_total;
    return NVML_SUCCESS;
}

int nvmlDeviceGetMigMode(struct fake_device *device, unsigned *current, unsigned *pending) {
    if (!fake.initialised) return NVML_ERROR_UNINITIALIZED;
    if (device == NULL || current == NULL || pending == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (device->is_mig || device->mig_mode < 0) return NVML_ERROR_NOT_SUPPORTED;
    *current = *pending = (unsigned)device->mig_mode;
    return NVML_SUCCESS;
}

int nvmlDeviceGetMaxMigDeviceCount(struct fake_device *device, unsigned *count) {
    if (!fake.initialised) return NVML_ERROR_UNINITIALIZED;
    if (device == NULL || count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (device->is_mig || device->mig_mode < 0) return NVML_ERROR_NOT_SUPPORTED;
    *count = device->mig_mode == 1 ? MAX_MIG : 0;
    return NVML_SUCCESS;
}

int nvmlDeviceGetMigDeviceHandleByIndex(struct fake_device *device, unsigned index, struct fake_device **mig) {
    if (!fake.initialised) return NVML_ERROR_UNINITIALIZED;
    if (device == NULL || mig == NULL || index >= MAX_MIG) return NVML_ERROR_INVALID_ARGUMENT;
    if (device->mig_mode != 1) return NVML_ERROR_NOT_SUPPORTED;
    if (!device->mig[index].present) return NVML_ERROR_NOT_FOUND;
    int parent = (int)(device - fake.devices);
    struct fake_device *handle = &fake.mig_handles[parent][index];
    memset(handle, 0, sizeof *handle);
    copy_text(handle->name, device->name);
    copy_text(handle->uuid, device->mig[index].uuid);
    handle->major = device->major;
    handle->minor = device->minor;
    handle->is_mig = 1;
    handle->mig_mode = -1;
    *mig = handle;
    return NVML_SUCCESS;
}
