/*
 * What the emulated Direct3D 12 device of the DirectML host tells DirectML about itself: the
 * evidence that some of what `ep-testbed run --ep dml-wine` reports is the device's, not
 * DirectML's. Built and run by tests/eps/test_dml_wine_observed.py (x86_64-w64-mingw32-gcc, under
 * Wine with the set-up's DLLs beside it); prints one "key value" line per fact:
 *
 *   d3d12.MinPrecisionSupport N          D3D12_FEATURE_D3D12_OPTIONS (0: no 16-bit minimum precision)
 *   d3d12.Native16BitShaderOpsSupported  D3D12_FEATURE_D3D12_OPTIONS4
 *   dml.tensor.<TYPE> 0|1                DML_FEATURE_TENSOR_DATA_TYPE_SUPPORT, what ORT's DML EP
 *                                        declines nodes by (ExecutionProvider.cpp, GetSupportedDeviceDataTypeMask)
 *   buffer.<bytes> 0x<HRESULT>           CreateCommittedResource of a buffer that size (the DML EP
 *                                        rounds its allocations up to a power of two)
 *
 * DirectML's device creation needs the same vkd3d 1.14 workaround as host.c (see there): the
 * EnumerateMetaCommands stub is pointed at a function that reports no meta commands.
 */
#define COBJMACROS
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#include <d3d12.h>
#include <stdio.h>

static const GUID IID_Device = {0x189819f1, 0x1db6, 0x4b57, {0xbe, 0x54, 0x18, 0x21, 0x33, 0x9b, 0x85, 0xf7}};
static const GUID IID_Device5 = {0x8b4f173b, 0x2fea, 0x4b80, {0x8f, 0x58, 0x43, 0x07, 0x19, 0x1a, 0xb9, 0x5d}};
static const GUID IID_Resource = {0x696442be, 0xa72e, 0x4059, {0xbc, 0x79, 0x5b, 0x5c, 0x98, 0x04, 0x0f, 0xad}};
static const GUID IID_DmlDevice = {0x6dbd6437, 0x96fd, 0x423f, {0xa9, 0x8c, 0xae, 0x5e, 0x7c, 0x2a, 0x57, 0x3f}};
typedef HRESULT(WINAPI *CreateDeviceFn)(IUnknown *, D3D_FEATURE_LEVEL, REFIID, void **);
typedef HRESULT(WINAPI *DmlCreateDeviceFn)(ID3D12Device *, UINT, REFIID, void **);
/* IDMLDevice::CheckFeatureSupport: slot 7 (IUnknown 3, IDMLObject 4). */
typedef HRESULT(STDMETHODCALLTYPE *CheckFeatureFn)(void *, int, UINT, const void *, UINT, void *);
typedef HRESULT(STDMETHODCALLTYPE *EnumMetaCommandsFn)(void *, UINT *, void *);
#define SLOT_ENUMERATE_META_COMMANDS 59

static HRESULT STDMETHODCALLTYPE no_meta_commands(void *self, UINT *count, void *descs)
{
    (void)self;
    (void)descs;
    if (count) *count = 0;
    return S_OK;
}

static void patch_meta_commands(ID3D12Device *device)
{
    IUnknown *device5 = NULL;
    if (FAILED(ID3D12Device_QueryInterface(device, &IID_Device5, (void **)&device5))) return;
    void **vtable = *(void ***)device5;
    UINT count = 0;
    DWORD old = 0;
    if (((EnumMetaCommandsFn)vtable[SLOT_ENUMERATE_META_COMMANDS])(device5, &count, NULL) == E_NOTIMPL &&
        VirtualProtect(&vtable[SLOT_ENUMERATE_META_COMMANDS], sizeof(void *), PAGE_READWRITE, &old)) {
        vtable[SLOT_ENUMERATE_META_COMMANDS] = (void *)no_meta_commands;
        VirtualProtect(&vtable[SLOT_ENUMERATE_META_COMMANDS], sizeof(void *), old, &old);
    }
    IUnknown_Release(device5);
}

static void buffers(ID3D12Device *device)
{
    static const UINT64 sizes[] = {(1ull << 32) - (1ull << 16), 1ull << 32};
    for (int i = 0; i < 2; i++) {
        D3D12_HEAP_PROPERTIES heap = {D3D12_HEAP_TYPE_DEFAULT, D3D12_CPU_PAGE_PROPERTY_UNKNOWN, D3D12_MEMORY_POOL_UNKNOWN, 1, 1};
        D3D12_RESOURCE_DESC desc = {D3D12_RESOURCE_DIMENSION_BUFFER, 0, sizes[i], 1, 1, 1, DXGI_FORMAT_UNKNOWN, {1, 0},
                                    D3D12_TEXTURE_LAYOUT_ROW_MAJOR, D3D12_RESOURCE_FLAG_ALLOW_UNORDERED_ACCESS};
        ID3D12Resource *resource = NULL;
        HRESULT hr = ID3D12Device_CreateCommittedResource(device, &heap, D3D12_HEAP_FLAG_NONE, &desc,
                                                          D3D12_RESOURCE_STATE_COMMON, NULL, &IID_Resource,
                                                          (void **)&resource);
        printf("buffer.%llu 0x%08lx\n", (unsigned long long)sizes[i], (unsigned long)hr);
        if (resource) ID3D12Resource_Release(resource);
    }
}

int main(void)
{
    static const char *types[] = {"UNKNOWN", "FLOAT32", "FLOAT16", "UINT32", "UINT16", "UINT8", "INT32", "INT16",
                                  "INT8", "FLOAT64", "UINT64", "INT64"};
    HMODULE d3d12 = LoadLibraryW(L"d3d12.dll"), dml = LoadLibraryW(L"DirectML.dll");
    CreateDeviceFn create = d3d12 ? (CreateDeviceFn)(void (*)(void))GetProcAddress(d3d12, "D3D12CreateDevice") : NULL;
    DmlCreateDeviceFn create_dml = dml ? (DmlCreateDeviceFn)(void (*)(void))GetProcAddress(dml, "DMLCreateDevice") : NULL;
    ID3D12Device *device = NULL;
    if (!create || !create_dml || FAILED(create(NULL, D3D_FEATURE_LEVEL_11_0, &IID_Device, (void **)&device))) {
        printf("error no Direct3D 12 device or DirectML\n");
        return 1;
    }
    D3D12_FEATURE_DATA_D3D12_OPTIONS options = {0};
    D3D12_FEATURE_DATA_D3D12_OPTIONS4 options4 = {0};
    if (SUCCEEDED(ID3D12Device_CheckFeatureSupport(device, D3D12_FEATURE_D3D12_OPTIONS, &options, sizeof options)))
        printf("d3d12.MinPrecisionSupport %d\n", (int)options.MinPrecisionSupport);
    if (SUCCEEDED(ID3D12Device_CheckFeatureSupport(device, D3D12_FEATURE_D3D12_OPTIONS4, &options4, sizeof options4)))
        printf("d3d12.Native16BitShaderOpsSupported %d\n", (int)options4.Native16BitShaderOpsSupported);
    patch_meta_commands(device);
    void *dml_device = NULL;
    HRESULT hr = create_dml(device, 0, &IID_DmlDevice, &dml_device);
    if (FAILED(hr)) {
        printf("error DMLCreateDevice 0x%08lx\n", (unsigned long)hr);
        return 1;
    }
    CheckFeatureFn check = (CheckFeatureFn)(*(void ***)dml_device)[7];
    for (int t = 1; t < (int)(sizeof types / sizeof types[0]); t++) {
        int query = t; /* DML_FEATURE_QUERY_TENSOR_DATA_TYPE_SUPPORT { DataType } */
        BOOL supported = FALSE;
        if (SUCCEEDED(check(dml_device, 0 /* DML_FEATURE_TENSOR_DATA_TYPE_SUPPORT */, sizeof query, &query,
                            sizeof supported, &supported)))
            printf("dml.tensor.%s %d\n", types[t], supported ? 1 : 0);
    }
    buffers(device);
    fflush(stdout);
    return 0;
}
