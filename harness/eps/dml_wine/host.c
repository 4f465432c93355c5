/*
 * ep-testbed's DirectML host: a Windows console program that builds and runs ONNX Runtime sessions
 * on Microsoft's DirectML EP (or ORT's CPU EP) for a Linux client, under Wine with vkd3d's
 * Direct3D 12. One process serves many sessions, so Wine's start (about 2 s) is paid once.
 *
 * Built and placed by tools/dml-wine.sh (x86_64-w64-mingw32-gcc, against ONNX Runtime's public C
 * API header, onnxruntime_c_api.h, which that script downloads: nothing of ONNX Runtime is in this
 * repository). onnxruntime.dll is loaded at run time, so the program starts, and says why, even
 * when a DLL is missing. harness/eps/dml_wine/host.py is the client and documents the use.
 *
 *   host.exe --hello      print the versions (the "hello" JSON below) on stdout and exit
 *   host.exe              serve requests on stdin/stdout until stdin closes or a QUIT request
 *
 * Protocol (all integers little-endian). A frame is a u64 byte count and that many bytes, both
 * ways; one response frame per request frame, in order. Inside a frame: str = u32 n + n bytes
 * (UTF-8), blob = u64 n + n bytes, tensor = str name, i32 ONNX element type, u32 rank,
 * i64 dims[rank], blob raw bytes (row-major, the element type's native little-endian layout).
 *
 *   request  u8 type, then by type:
 *     1 HELLO    -
 *     2 RUN      u8 provider (0 CPU, 1 DML), i32 device_id, u8 DML device (0: the EP makes its
 *                own for the session, as ORT's device_id path does; 1: the host's shared device
 *                for device_id, see shared_dml_device), i32 graph optimization level
 *                (0, 1, 2, 99), i32 log severity (0 verbose ... 4 fatal), u8 profile (0/1),
 *                u32 n + n x (str key, str value) session config entries, blob model (ONNX
 *                protobuf), u32 n + n x tensor (the feeds)
 *     3 QUIT     - (answered, then the process exits 0)
 *     0xF0       test only: abort() at once (no response): the client's crash handling
 *     0xF1       test only: u32 milliseconds, sleep, then answer: the client's timeouts
 *   response u8 status (0 ok, 1 build error, 2 run error, 3 bad request), str message (ONNX
 *            Runtime's text verbatim on 1 and 2), then by type:
 *     HELLO      str JSON (the versions and the device, see hello_json)
 *     RUN        f64 seconds in: session options (the DML EP's device made here), session
 *                build, run, read-back and release; u32 n + n x tensor (the outputs in the
 *                session's output order; empty unless ok), str profiling trace JSON (empty
 *                when profiling is off), u8 assignment info present (0/1), u32 n subgraphs +
 *                n x (str EP name, u32 n nodes + n x (str node name, str op type))
 *     others     -
 *
 * stdout carries only frames: the standard output handle is pointed at stderr before any DLL
 * loads, so whatever ONNX Runtime, DirectML or Wine print goes to stderr. Before each response
 * the host writes END_MARKER on a line of its own to stderr, so the client can tell which
 * request wrote which of Wine's and vkd3d's messages (they say why a shader was refused).
 */
#define COBJMACROS
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#include <d3d12.h>
#include <dxgi.h>
#include <io.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "onnxruntime_c_api.h"

#define HOST_PROTOCOL 1
#define END_MARKER "[ep-testbed-host] end of request"

enum { REQ_HELLO = 1, REQ_RUN = 2, REQ_QUIT = 3, REQ_TEST_ABORT = 0xF0, REQ_TEST_STALL = 0xF1 };
enum { ST_OK = 0, ST_BUILD = 1, ST_RUN = 2, ST_BAD_REQUEST = 3 };

/* ------------------------------------------------------------------------------------------ */
/* Growable byte buffer: responses and JSON text are built in one, then sent whole.           */

typedef struct {
    uint8_t *data;
    size_t len, cap;
} Buf;

static void buf_put(Buf *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        uint8_t *grown = realloc(b->data, cap);
        if (!grown) {
            fputs("host: out of memory\n", stderr);
            exit(3);
        }
        b->data = grown;
        b->cap = cap;
    }
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
}

static void put_u8(Buf *b, uint8_t v) { buf_put(b, &v, 1); }
static void put_u32(Buf *b, uint32_t v) { buf_put(b, &v, 4); } /* x86-64: already little-endian */
static void put_i32(Buf *b, int32_t v) { buf_put(b, &v, 4); }
static void put_u64(Buf *b, uint64_t v) { buf_put(b, &v, 8); }
static void put_i64(Buf *b, int64_t v) { buf_put(b, &v, 8); }
static void put_f64(Buf *b, double v) { buf_put(b, &v, 8); }

static void put_strn(Buf *b, const char *s, size_t n)
{
    put_u32(b, (uint32_t)n);
    buf_put(b, s, n);
}

static void put_str(Buf *b, const char *s) { put_strn(b, s ? s : "", s ? strlen(s) : 0); }

static void put_blob(Buf *b, const void *p, size_t n)
{
    put_u64(b, n);
    buf_put(b, p, n);
}

static void text(Buf *b, const char *s) { buf_put(b, s, strlen(s)); }

static void textf(Buf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) buf_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* A JSON string literal; bytes >= 0x80 pass through (the text is UTF-8). */
static void json_str(Buf *b, const char *s)
{
    put_u8(b, '"');
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            put_u8(b, '\\');
            put_u8(b, c);
        } else if (c < 0x20) {
            textf(b, "\\u%04x", c);
        } else {
            put_u8(b, c);
        }
    }
    put_u8(b, '"');
}

static void json_key(Buf *b, const char *key)
{
    if (b->len && b->data[b->len - 1] != '{' && b->data[b->len - 1] != '[') put_u8(b, ',');
    json_str(b, key);
    put_u8(b, ':');
}

static void json_kv_str(Buf *b, const char *key, const char *value)
{
    json_key(b, key);
    if (value) json_str(b, value);
    else text(b, "null");
}

static void json_kv_num(Buf *b, const char *key, long long value)
{
    json_key(b, key);
    textf(b, "%lld", value);
}

/* ------------------------------------------------------------------------------------------ */
/* Reading a request frame: every read is bounds-checked; a short frame marks the reader bad. */

typedef struct {
    const uint8_t *p;
    size_t left;
    int bad;
} Reader;

static const uint8_t *take(Reader *r, size_t n)
{
    if (r->bad || n > r->left) {
        r->bad = 1;
        return NULL;
    }
    const uint8_t *p = r->p;
    r->p += n;
    r->left -= n;
    return p;
}

#define DEFINE_GET(name, type)                        \
    static type name(Reader *r)                       \
    {                                                 \
        type v = 0;                                   \
        const uint8_t *p = take(r, sizeof v);         \
        if (p) memcpy(&v, p, sizeof v);               \
        return v;                                     \
    }
DEFINE_GET(get_u8, uint8_t)
DEFINE_GET(get_u32, uint32_t)
DEFINE_GET(get_i32, int32_t)
DEFINE_GET(get_u64, uint64_t)

/* A str as a NUL-terminated copy (ORT's API takes C strings); freed by the caller. */
static char *get_str(Reader *r)
{
    uint32_t n = get_u32(r);
    const uint8_t *p = take(r, n);
    if (!p) return NULL;
    char *s = malloc((size_t)n + 1);
    if (!s) exit(3);
    memcpy(s, p, n);
    s[n] = 0;
    return s;
}

static const uint8_t *get_blob(Reader *r, size_t *n)
{
    uint64_t len = get_u64(r);
    *n = (size_t)len;
    return take(r, (size_t)len);
}

/* ------------------------------------------------------------------------------------------ */
/* Frames on the process's stdin and the saved stdout handle.                                 */

static HANDLE g_in, g_out;

static int read_exact(void *dst, size_t n)
{
    uint8_t *p = dst;
    while (n) {
        DWORD got = 0, want = n > (1u << 30) ? (1u << 30) : (DWORD)n;
        if (!ReadFile(g_in, p, want, &got, NULL) || got == 0) return 0;
        p += got;
        n -= got;
    }
    return 1;
}

static void write_exact(const void *src, size_t n)
{
    const uint8_t *p = src;
    while (n) {
        DWORD put = 0, want = n > (1u << 30) ? (1u << 30) : (DWORD)n;
        if (!WriteFile(g_out, p, want, &put, NULL) || put == 0) exit(4); /* the client is gone */
        p += put;
        n -= put;
    }
}

static void send_frame(const Buf *b)
{
    uint64_t n = b->len;
    write_exact(&n, 8);
    write_exact(b->data, b->len);
}

/* ------------------------------------------------------------------------------------------ */
/* Small Windows helpers.                                                                     */

static char *utf8_from_wide(const WCHAR *w)
{
    int n = WideCharToMultiByte(CP_UTF8, 0, w, -1, NULL, 0, NULL, NULL);
    char *s = malloc(n > 0 ? (size_t)n : 1);
    if (!s) exit(3);
    s[0] = 0;
    if (n > 0) WideCharToMultiByte(CP_UTF8, 0, w, -1, s, n, NULL, NULL);
    return s;
}

static WCHAR *wide_from_utf8(const char *s)
{
    int n = MultiByteToWideChar(CP_UTF8, 0, s, -1, NULL, 0);
    WCHAR *w = malloc(sizeof(WCHAR) * (n > 0 ? (size_t)n : 1));
    if (!w) exit(3);
    w[0] = 0;
    if (n > 0) MultiByteToWideChar(CP_UTF8, 0, s, -1, w, n);
    return w;
}

static double now_s(void)
{
    static LARGE_INTEGER freq;
    LARGE_INTEGER t;
    if (!freq.QuadPart) QueryPerformanceFrequency(&freq);
    QueryPerformanceCounter(&t);
    return (double)t.QuadPart / (double)freq.QuadPart;
}

/* The folder of host.exe, where tools/dml-wine.sh puts every DLL this program loads. */
static void exe_dir(WCHAR *dir, size_t cap)
{
    DWORD n = GetModuleFileNameW(NULL, dir, (DWORD)cap);
    while (n && dir[n - 1] != L'\\' && dir[n - 1] != L'/') n--;
    dir[n] = 0;
}

/* ------------------------------------------------------------------------------------------ */
/* ONNX Runtime, loaded at run time.                                                          */

typedef OrtStatus *(ORT_API_CALL *AppendDmlFn)(OrtSessionOptions *, int);
typedef OrtStatus *(ORT_API_CALL *AppendDmlExFn)(OrtSessionOptions *, IUnknown *dml_device, ID3D12CommandQueue *);

static const OrtApi *g_ort;
static OrtEnv *g_env;
static OrtMemoryInfo *g_cpu;
static OrtAllocator *g_alloc;
static AppendDmlFn g_append_dml;
static AppendDmlExFn g_append_dml_ex;
static const char *g_ort_version;
static int g_api_version;   /* the OrtApi version asked of onnxruntime.dll */
static char g_ort_error[512];

/* The OrtApi table is append-only: a header's table prefix is valid in any later runtime, so
 * ask for min(this header's version, the runtime's minor version). */
static int api_version_for(const char *runtime_version)
{
    int major = 0, minor = 0;
    if (sscanf(runtime_version, "%d.%d", &major, &minor) != 2 || major != 1) return ORT_API_VERSION;
    return minor < ORT_API_VERSION ? minor : ORT_API_VERSION;
}

static int load_ort(void)
{
    HMODULE ort = LoadLibraryW(L"onnxruntime.dll");
    if (!ort) {
        snprintf(g_ort_error, sizeof g_ort_error, "LoadLibrary(onnxruntime.dll) failed: error %lu",
                 GetLastError());
        return 0;
    }
    typedef const OrtApiBase *(ORT_API_CALL *GetApiBaseFn)(void);
    GetApiBaseFn get_base = (GetApiBaseFn)(void (*)(void))GetProcAddress(ort, "OrtGetApiBase");
    g_append_dml = (AppendDmlFn)(void (*)(void))GetProcAddress(ort, "OrtSessionOptionsAppendExecutionProvider_DML");
    g_append_dml_ex = (AppendDmlExFn)(void (*)(void))GetProcAddress(ort, "OrtSessionOptionsAppendExecutionProviderEx_DML");
    if (!get_base) {
        snprintf(g_ort_error, sizeof g_ort_error, "onnxruntime.dll exports no OrtGetApiBase");
        return 0;
    }
    const OrtApiBase *base = get_base();
    g_ort_version = base->GetVersionString();
    g_api_version = api_version_for(g_ort_version);
    g_ort = base->GetApi((uint32_t)g_api_version);
    if (!g_ort) {
        snprintf(g_ort_error, sizeof g_ort_error, "onnxruntime.dll %s refused OrtApi version %d",
                 g_ort_version, g_api_version);
        return 0;
    }
    OrtStatus *st = g_ort->CreateEnv(ORT_LOGGING_LEVEL_WARNING, "ep-testbed-host", &g_env);
    if (!st) st = g_ort->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &g_cpu);
    if (!st) st = g_ort->GetAllocatorWithDefaultOptions(&g_alloc);
    if (st) {
        snprintf(g_ort_error, sizeof g_ort_error, "ONNX Runtime start: %s", g_ort->GetErrorMessage(st));
        g_ort->ReleaseStatus(st);
        g_ort = NULL;
        return 0;
    }
    return 1;
}

/* ------------------------------------------------------------------------------------------ */
/* vkd3d 1.14 workaround, applied once at start.                                              */
/*
 * vkd3d 1.14 (the Direct3D 12 of Wine 10.0) stubs ID3D12Device5::EnumerateMetaCommands with
 * E_NOTIMPL; DirectML's device creation (DMLCreateDevice) calls it and fails 0x80004001, and
 * ORT's DML EP then cannot start. A device without meta commands is legal (count 0), so the
 * slot is pointed at a function that says so. vkd3d's device vtable is one static table shared
 * by every device it creates: patching it through a throwaway device fixes every later device,
 * DirectML's included. Slot 59 = ID3D12Device (44) + Device1 (3) + Device2 (1) + Device3 (3)
 * + Device4 (6) + Device5's CreateLifetimeTracker and RemoveDevice (2); see d3d12.idl in
 * https://github.com/microsoft/DirectX-Headers. The slot is patched only when calling it
 * returns E_NOTIMPL, so a vkd3d that implements the method is left alone.
 */
_Static_assert(sizeof(ID3D12Device1Vtbl) / sizeof(void *) == 47, "ID3D12Device1 has 47 slots");
#define SLOT_ENUMERATE_META_COMMANDS (47 + 1 + 3 + 6 + 2)

static const GUID IID_Device5 = {0x8b4f173b, 0x2fea, 0x4b80, {0x8f, 0x58, 0x43, 0x07, 0x19, 0x1a, 0xb9, 0x5d}};
typedef HRESULT(STDMETHODCALLTYPE *EnumMetaCommandsFn)(void *self, UINT *count, void *descs);

static HRESULT STDMETHODCALLTYPE no_meta_commands(void *self, UINT *count, void *descs)
{
    (void)self;
    (void)descs;
    if (count) *count = 0;
    return S_OK;
}

static char g_meta_patch[160] = "not tried";

static void patch_meta_commands(ID3D12Device *device)
{
    IUnknown *device5 = NULL;
    if (FAILED(ID3D12Device_QueryInterface(device, &IID_Device5, (void **)&device5))) {
        snprintf(g_meta_patch, sizeof g_meta_patch, "not needed: no ID3D12Device5");
        return;
    }
    void **vtable = *(void ***)device5;
    UINT count = 0;
    HRESULT hr = ((EnumMetaCommandsFn)vtable[SLOT_ENUMERATE_META_COMMANDS])(device5, &count, NULL);
    if (hr != E_NOTIMPL) {
        snprintf(g_meta_patch, sizeof g_meta_patch, "not needed: EnumerateMetaCommands returned 0x%08lx",
                 (unsigned long)hr);
    } else {
        DWORD old = 0;
        void **slot = &vtable[SLOT_ENUMERATE_META_COMMANDS];
        if (VirtualProtect(slot, sizeof *slot, PAGE_READWRITE, &old)) {
            *slot = (void *)no_meta_commands;
            VirtualProtect(slot, sizeof *slot, old, &old);
            snprintf(g_meta_patch, sizeof g_meta_patch,
                     "applied: EnumerateMetaCommands stub (E_NOTIMPL, vkd3d 1.14) now reports 0 meta commands");
        } else {
            snprintf(g_meta_patch, sizeof g_meta_patch, "failed: VirtualProtect error %lu", GetLastError());
        }
    }
    IUnknown_Release(device5);
}

/* ------------------------------------------------------------------------------------------ */
/* Device facts for hello: DXGI adapters, and the D3D12 device on adapter 0.                 */

static char g_d3d_error[256];
static int g_feature_level, g_shader_model; /* 0xb000 = 11_0; 0x51 = 5.1 */

/* The interface ids, defined here: the libraries that define them would also bind d3d12.dll and
 * dxgi.dll at load time, and this program loads both itself. */
static const GUID IID_Device = {0x189819f1, 0x1db6, 0x4b57, {0xbe, 0x54, 0x18, 0x21, 0x33, 0x9b, 0x85, 0xf7}};
static const GUID IID_Factory1 = {0x770aae78, 0xf26f, 0x4dba, {0xa8, 0x29, 0x25, 0x3c, 0x83, 0xd1, 0xb3, 0x87}};

typedef HRESULT(WINAPI *CreateDeviceFn)(IUnknown *, D3D_FEATURE_LEVEL, REFIID, void **);
typedef HRESULT(WINAPI *CreateFactoryFn)(REFIID, void **);

static void query_features(ID3D12Device *device)
{
    static const D3D_FEATURE_LEVEL levels[] = {0xb000, 0xb100, 0xc000, 0xc100, 0xc200};
    D3D12_FEATURE_DATA_FEATURE_LEVELS fl = {sizeof levels / sizeof levels[0], levels, 0};
    if (SUCCEEDED(ID3D12Device_CheckFeatureSupport(device, D3D12_FEATURE_FEATURE_LEVELS, &fl, sizeof fl)))
        g_feature_level = fl.MaxSupportedFeatureLevel;
    /* Ask for the highest model this program knows; a runtime that does not know it answers
     * E_INVALIDARG, so step down (6.7 ... 5.1, the documented protocol of this query). */
    for (int sm = 0x67; sm >= 0x51; sm = (sm == 0x60) ? 0x51 : sm - 1) {
        D3D12_FEATURE_DATA_SHADER_MODEL data = {(D3D_SHADER_MODEL)sm};
        if (SUCCEEDED(ID3D12Device_CheckFeatureSupport(device, D3D12_FEATURE_SHADER_MODEL, &data, sizeof data))) {
            g_shader_model = data.HighestShaderModel;
            break;
        }
        if (sm == 0x51) break;
    }
}

static void start_d3d12(void)
{
    HMODULE d3d12 = LoadLibraryW(L"d3d12.dll");
    CreateDeviceFn create = d3d12 ? (CreateDeviceFn)(void (*)(void))GetProcAddress(d3d12, "D3D12CreateDevice") : NULL;
    if (!create) {
        snprintf(g_d3d_error, sizeof g_d3d_error, "d3d12.dll or D3D12CreateDevice missing (error %lu)", GetLastError());
        return;
    }
    ID3D12Device *device = NULL;
    HRESULT hr = create(NULL, D3D_FEATURE_LEVEL_11_0, &IID_Device, (void **)&device);
    if (FAILED(hr)) {
        snprintf(g_d3d_error, sizeof g_d3d_error, "D3D12CreateDevice failed: 0x%08lx", (unsigned long)hr);
        return;
    }
    patch_meta_commands(device);
    query_features(device);
    ID3D12Device_Release(device);
    /* d3d12.dll stays loaded: the patched vtable lives in it. */
}

static void json_adapters(Buf *b)
{
    json_key(b, "adapters");
    put_u8(b, '[');
    HMODULE dxgi = LoadLibraryW(L"dxgi.dll");
    CreateFactoryFn create = dxgi ? (CreateFactoryFn)(void (*)(void))GetProcAddress(dxgi, "CreateDXGIFactory1") : NULL;
    IDXGIFactory1 *factory = NULL;
    if (create && SUCCEEDED(create(&IID_Factory1, (void **)&factory))) {
        IDXGIAdapter1 *adapter = NULL;
        for (UINT i = 0; IDXGIFactory1_EnumAdapters1(factory, i, &adapter) == S_OK; i++) {
            DXGI_ADAPTER_DESC1 desc;
            if (SUCCEEDED(IDXGIAdapter1_GetDesc1(adapter, &desc))) {
                char *name = utf8_from_wide(desc.Description);
                put_u8(b, '{');
                json_kv_num(b, "index", i);
                json_kv_str(b, "description", name);
                json_kv_num(b, "vendor_id", desc.VendorId);
                json_kv_num(b, "device_id", desc.DeviceId);
                json_kv_num(b, "dedicated_video_memory", (long long)desc.DedicatedVideoMemory);
                json_kv_num(b, "software", (desc.Flags & DXGI_ADAPTER_FLAG_SOFTWARE) != 0);
                put_u8(b, '}');
                put_u8(b, ',');
                free(name);
            }
            IDXGIAdapter1_Release(adapter);
        }
        IDXGIFactory1_Release(factory);
        if (b->data[b->len - 1] == ',') b->len--;
    }
    put_u8(b, ']');
}

/* FileVersion string (e.g. "1.15.4+241025-1615.1.dml-1.15.fac7597") of a DLL beside host.exe. */
static void json_file_version(Buf *b, const char *key, const WCHAR *file)
{
    WCHAR path[MAX_PATH * 2];
    exe_dir(path, MAX_PATH);
    wcscat(path, file);
    char *upath = utf8_from_wide(path);
    json_key(b, key);
    put_u8(b, '{');
    json_kv_str(b, "path", upath);
    free(upath);
    DWORD ignored = 0, size = GetFileVersionInfoSizeW(path, &ignored);
    void *info = size ? malloc(size) : NULL;
    if (info && GetFileVersionInfoW(path, 0, size, info)) {
        VS_FIXEDFILEINFO *fixed = NULL;
        UINT len = 0;
        if (VerQueryValueW(info, L"\\", (void **)&fixed, &len) && fixed) {
            char num[64];
            snprintf(num, sizeof num, "%u.%u.%u.%u", HIWORD(fixed->dwFileVersionMS), LOWORD(fixed->dwFileVersionMS),
                     HIWORD(fixed->dwFileVersionLS), LOWORD(fixed->dwFileVersionLS));
            json_kv_str(b, "file_version_number", num);
        }
        /* The string block of the first language the resource lists (DirectML's is not US English). */
        WORD *lang = NULL;
        WCHAR key[64], *str = NULL;
        if (!VerQueryValueW(info, L"\\VarFileInfo\\Translation", (void **)&lang, &len) || len < 4) lang = NULL;
        _snwprintf(key, 64, L"\\StringFileInfo\\%04x%04x\\FileVersion", lang ? lang[0] : 0x0409, lang ? lang[1] : 0x04b0);
        if (VerQueryValueW(info, key, (void **)&str, &len) && str) {
            char *u = utf8_from_wide(str);
            json_kv_str(b, "file_version", u);
            free(u);
        }
    } else {
        json_kv_str(b, "error", "no version resource (file missing?)");
    }
    free(info);
    put_u8(b, '}');
}

static const char *wine_version(void)
{
    typedef const char *(CDECL * WineVersionFn)(void);
    HMODULE ntdll = GetModuleHandleW(L"ntdll.dll");
    WineVersionFn fn = ntdll ? (WineVersionFn)(void (*)(void))GetProcAddress(ntdll, "wine_get_version") : NULL;
    return fn ? fn() : NULL; /* NULL: not Wine */
}

static int has_assignment_info(void) { return ORT_API_VERSION >= 24 && g_api_version >= 24; }

static void hello_json(Buf *b)
{
    char tmp[32];
    put_u8(b, '{');
    json_kv_num(b, "host_protocol", HOST_PROTOCOL);
    json_kv_num(b, "process_id", GetCurrentProcessId()); /* Windows pid: names its trace files */
    json_kv_str(b, "onnxruntime_version", g_ort_version);
    json_kv_str(b, "onnxruntime_error", g_ort ? NULL : g_ort_error);
    json_kv_num(b, "ort_header_api_version", ORT_API_VERSION);
    json_kv_num(b, "ort_api_version", g_api_version);
    json_key(b, "assignment_info");
    text(b, has_assignment_info() ? "true" : "false");
    json_key(b, "dml_entry_point");
    text(b, g_append_dml ? "true" : "false");
    json_file_version(b, "directml_dll", L"DirectML.dll");
    json_file_version(b, "onnxruntime_dll", L"onnxruntime.dll");
    json_kv_str(b, "wine_version", wine_version());
    json_adapters(b);
    json_key(b, "d3d12");
    put_u8(b, '{');
    json_kv_str(b, "error", g_d3d_error[0] ? g_d3d_error : NULL);
    snprintf(tmp, sizeof tmp, "%d_%d", g_feature_level >> 12, (g_feature_level >> 8) & 0xf);
    json_kv_str(b, "feature_level", g_feature_level ? tmp : NULL);
    snprintf(tmp, sizeof tmp, "%d.%d", g_shader_model >> 4, g_shader_model & 0xf);
    json_kv_str(b, "shader_model", g_shader_model ? tmp : NULL);
    json_kv_str(b, "meta_commands_workaround", g_meta_patch);
    put_u8(b, '}');
    put_u8(b, '}');
}

/* ------------------------------------------------------------------------------------------ */
/* The shared DirectML device.                                                                */
/*
 * ORT's DML EP, given a device_id, creates a Direct3D 12 device, a command queue and a DirectML
 * device for every session: 0.1-0.25 s of each one-node request here. A RUN may instead ask
 * for one set made once per adapter and handed to each session
 * (OrtSessionOptionsAppendExecutionProviderEx_DML, exported by onnxruntime.dll; see
 * include/onnxruntime/core/providers/dml/dml_provider_factory.h in
 * https://github.com/microsoft/onnxruntime). It is made as ORT makes its own: the DXGI adapter
 * at index device_id, feature level 11_0, a DIRECT queue that never times out, DMLCreateDevice
 * with no flags. A device found removed is made again.
 */
static const GUID IID_Queue = {0x0ec870a6, 0x5d7e, 0x4c22, {0x8c, 0xfc, 0x5b, 0xaa, 0xe0, 0x76, 0x16, 0xed}};
static const GUID IID_DmlDevice = {0x6dbd6437, 0x96fd, 0x423f, {0xa9, 0x8c, 0xae, 0x5e, 0x7c, 0x2a, 0x57, 0x3f}};
typedef HRESULT(WINAPI *DmlCreateDeviceFn)(ID3D12Device *, UINT flags, REFIID, void **);

static struct {
    int device_id;
    ID3D12Device *d3d;
    ID3D12CommandQueue *queue;
    IUnknown *dml;
} g_shared = {-1, NULL, NULL, NULL};

static void release_shared(void)
{
    if (g_shared.dml) IUnknown_Release(g_shared.dml);
    if (g_shared.queue) ID3D12CommandQueue_Release(g_shared.queue);
    if (g_shared.d3d) ID3D12Device_Release(g_shared.d3d);
    g_shared.dml = NULL, g_shared.queue = NULL, g_shared.d3d = NULL, g_shared.device_id = -1;
}

static HRESULT make_shared(int device_id, char *why, size_t cap)
{
    HMODULE dxgi = LoadLibraryW(L"dxgi.dll"), dml = LoadLibraryW(L"DirectML.dll"), d3d12 = LoadLibraryW(L"d3d12.dll");
    CreateFactoryFn factory_fn = dxgi ? (CreateFactoryFn)(void (*)(void))GetProcAddress(dxgi, "CreateDXGIFactory1") : NULL;
    DmlCreateDeviceFn dml_fn = dml ? (DmlCreateDeviceFn)(void (*)(void))GetProcAddress(dml, "DMLCreateDevice") : NULL;
    CreateDeviceFn d3d_fn = d3d12 ? (CreateDeviceFn)(void (*)(void))GetProcAddress(d3d12, "D3D12CreateDevice") : NULL;
    IDXGIFactory1 *factory = NULL;
    IDXGIAdapter1 *adapter = NULL;
    HRESULT hr = (factory_fn && dml_fn && d3d_fn) ? factory_fn(&IID_Factory1, (void **)&factory) : E_NOINTERFACE;
    const char *stage = "loading dxgi.dll, d3d12.dll and DirectML.dll";
    if (SUCCEEDED(hr) && (stage = "IDXGIFactory1::EnumAdapters1(device_id)"))
        hr = IDXGIFactory1_EnumAdapters1(factory, (UINT)device_id, &adapter);
    if (SUCCEEDED(hr) && (stage = "D3D12CreateDevice"))
        hr = d3d_fn((IUnknown *)adapter, D3D_FEATURE_LEVEL_11_0, &IID_Device, (void **)&g_shared.d3d);
    if (SUCCEEDED(hr) && (stage = "ID3D12Device::CreateCommandQueue")) {
        D3D12_COMMAND_QUEUE_DESC desc = {D3D12_COMMAND_LIST_TYPE_DIRECT, 0, D3D12_COMMAND_QUEUE_FLAG_DISABLE_GPU_TIMEOUT, 0};
        hr = ID3D12Device_CreateCommandQueue(g_shared.d3d, &desc, &IID_Queue, (void **)&g_shared.queue);
    }
    if (SUCCEEDED(hr) && (stage = "DMLCreateDevice"))
        hr = dml_fn(g_shared.d3d, 0, &IID_DmlDevice, (void **)&g_shared.dml);
    if (adapter) IDXGIAdapter1_Release(adapter);
    if (factory) IDXGIFactory1_Release(factory);
    if (FAILED(hr)) {
        snprintf(why, cap, "shared DirectML device for device_id %d: %s failed: 0x%08lx", device_id, stage,
                 (unsigned long)hr);
        release_shared();
        return hr;
    }
    g_shared.device_id = device_id;
    return S_OK;
}

/* The shared set for device_id, made (again) when missing, for another adapter, or removed. */
static int shared_dml_device(int device_id, char *why, size_t cap)
{
    if (g_shared.d3d && (g_shared.device_id != device_id || ID3D12Device_GetDeviceRemovedReason(g_shared.d3d) != S_OK))
        release_shared();
    return g_shared.d3d || SUCCEEDED(make_shared(device_id, why, cap));
}

/* ------------------------------------------------------------------------------------------ */
/* RUN: one session built, run once, read back, released.                                   */

typedef struct {
    uint8_t provider, shared_device;
    int32_t device_id, opt_level, log_level;
    uint8_t profile;
    uint32_t n_config;
    char **keys, **values;
    const uint8_t *model;
    size_t model_len;
    uint32_t n_inputs;
    char **in_names;
    int32_t *in_types;
    uint32_t *in_ranks;
    const int64_t **in_dims; /* point into the frame; may be unaligned, so copied before use */
    const uint8_t **in_data;
    size_t *in_len;
} RunRequest;

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) exit(3);
    return p;
}

static int parse_run(Reader *r, RunRequest *q)
{
    q->provider = get_u8(r);
    q->device_id = get_i32(r);
    q->shared_device = get_u8(r);
    q->opt_level = get_i32(r);
    q->log_level = get_i32(r);
    q->profile = get_u8(r);
    q->n_config = get_u32(r);
    if (r->bad || q->n_config > r->left / 8) return 0;
    q->keys = xcalloc(q->n_config, sizeof(char *));
    q->values = xcalloc(q->n_config, sizeof(char *));
    for (uint32_t i = 0; i < q->n_config; i++) {
        q->keys[i] = get_str(r);
        q->values[i] = get_str(r);
    }
    q->model = get_blob(r, &q->model_len);
    q->n_inputs = get_u32(r);
    if (r->bad || q->n_inputs > r->left / 20) return 0;
    q->in_names = xcalloc(q->n_inputs, sizeof(char *));
    q->in_types = xcalloc(q->n_inputs, sizeof(int32_t));
    q->in_ranks = xcalloc(q->n_inputs, sizeof(uint32_t));
    q->in_dims = xcalloc(q->n_inputs, sizeof(int64_t *));
    q->in_data = xcalloc(q->n_inputs, sizeof(uint8_t *));
    q->in_len = xcalloc(q->n_inputs, sizeof(size_t));
    for (uint32_t i = 0; i < q->n_inputs && !r->bad; i++) {
        q->in_names[i] = get_str(r);
        q->in_types[i] = get_i32(r);
        q->in_ranks[i] = get_u32(r);
        if (q->in_ranks[i] > 64) r->bad = 1;
        q->in_dims[i] = (const int64_t *)take(r, 8 * (size_t)q->in_ranks[i]);
        q->in_data[i] = get_blob(r, &q->in_len[i]);
    }
    return !r->bad;
}

static void free_run(RunRequest *q)
{
    for (uint32_t i = 0; q->keys && i < q->n_config; i++) {
        free(q->keys[i]);
        free(q->values[i]);
    }
    for (uint32_t i = 0; q->in_names && i < q->n_inputs; i++) free(q->in_names[i]);
    free(q->keys);
    free(q->values);
    free(q->in_names);
    free(q->in_types);
    free(q->in_ranks);
    free(q->in_dims);
    free(q->in_data);
    free(q->in_len);
}

/* The result of one RUN, sent as the response's tail. */
typedef struct {
    int status;
    Buf message;   /* ORT's text, NUL-terminated when set */
    double options_s, build_s, run_s, finish_s;
    Buf outputs;   /* n tensors, already encoded */
    uint32_t n_outputs;
    Buf profile;   /* trace JSON text */
    int has_assignment;
    Buf assignment;
    uint32_t n_subgraphs;
} RunResult;

/* Records a failing OrtStatus as the result's status and message; true when st was an error. */
static int failed(OrtStatus *st, RunResult *res, int status)
{
    if (!st) return 0;
    if (res->status == ST_OK) {
        res->status = status;
        text(&res->message, g_ort->GetErrorMessage(st));
    }
    g_ort->ReleaseStatus(st);
    return 1;
}

static void fail_text(RunResult *res, int status, const char *msg)
{
    if (res->status != ST_OK) return;
    res->status = status;
    text(&res->message, msg);
}

static size_t element_size(int32_t type)
{
    switch (type) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8: case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL:
        return 1;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16: case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16: case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16:
        return 2;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32:
        return 4;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE:
        return 8;
    default:
        return 0; /* strings, complex, 4-bit types: not carried by this protocol */
    }
}

static unsigned g_profile_counter;
static WCHAR g_profile_prefix[MAX_PATH * 2]; /* this request's trace file prefix, "" when none */

/* Deletes every file of this request's trace prefix: ORT writes a trace even for a session that
 * failed to build (its destructor ends profiling), and nobody else would remove it. */
static void delete_traces(void)
{
    WCHAR pattern[MAX_PATH * 2 + 2], path[MAX_PATH * 2 + MAX_PATH];
    WIN32_FIND_DATAW found;
    if (!g_profile_prefix[0]) return;
    _snwprintf(pattern, MAX_PATH * 2 + 2, L"%ls*", g_profile_prefix);
    HANDLE find = FindFirstFileW(pattern, &found);
    if (find == INVALID_HANDLE_VALUE) return;
    WCHAR *slash = wcsrchr(g_profile_prefix, L'\\');
    size_t dir_len = slash ? (size_t)(slash - g_profile_prefix) + 1 : 0;
    do {
        wmemcpy(path, g_profile_prefix, dir_len);
        _snwprintf(path + dir_len, MAX_PATH, L"%ls", found.cFileName);
        DeleteFileW(path);
    } while (FindNextFileW(find, &found));
    FindClose(find);
    g_profile_prefix[0] = 0;
}

/* The DML EP on the session's options: ORT's own device per session, or the shared one. */
static int append_dml(OrtSessionOptions *opts, const RunRequest *q, RunResult *res)
{
    char why[256];
    if (!q->shared_device) {
        if (g_append_dml) return failed(g_append_dml(opts, q->device_id), res, ST_BUILD);
        fail_text(res, ST_BUILD, "onnxruntime.dll exports no OrtSessionOptionsAppendExecutionProvider_DML");
        return 1;
    }
    if (!g_append_dml_ex) {
        fail_text(res, ST_BUILD, "onnxruntime.dll exports no OrtSessionOptionsAppendExecutionProviderEx_DML");
        return 1;
    }
    if (!shared_dml_device(q->device_id, why, sizeof why)) {
        fail_text(res, ST_BUILD, why);
        return 1;
    }
    return failed(g_append_dml_ex(opts, g_shared.dml, g_shared.queue), res, ST_BUILD);
}

static OrtSessionOptions *make_options(const RunRequest *q, RunResult *res)
{
    OrtSessionOptions *opts = NULL;
    if (failed(g_ort->CreateSessionOptions(&opts), res, ST_BUILD)) return NULL;
    int bad = failed(g_ort->SetSessionGraphOptimizationLevel(opts, (GraphOptimizationLevel)q->opt_level), res, ST_BUILD) ||
              failed(g_ort->SetSessionLogSeverityLevel(opts, q->log_level), res, ST_BUILD);
    for (uint32_t i = 0; !bad && i < q->n_config; i++)
        bad = failed(g_ort->AddSessionConfigEntry(opts, q->keys[i], q->values[i]), res, ST_BUILD);
    if (!bad && q->provider == 1) {
        /* What ORT's Python API does for DirectML (memory pattern off, sequential execution):
         * the DML EP requires both. */
        bad = failed(g_ort->DisableMemPattern(opts), res, ST_BUILD) ||
              failed(g_ort->SetSessionExecutionMode(opts, ORT_SEQUENTIAL), res, ST_BUILD);
        if (!bad) bad = append_dml(opts, q, res);
    }
    if (!bad && q->profile) {
        DWORD n = GetTempPathW(MAX_PATH, g_profile_prefix);
        _snwprintf(g_profile_prefix + n, MAX_PATH, L"ep-testbed-host-%lu-%u", GetCurrentProcessId(), g_profile_counter++);
        bad = failed(g_ort->EnableProfiling(opts, g_profile_prefix), res, ST_BUILD);
    }
    if (bad) {
        g_ort->ReleaseSessionOptions(opts);
        return NULL;
    }
    return opts;
}

static OrtValue **make_inputs(const RunRequest *q, RunResult *res)
{
    OrtValue **values = xcalloc(q->n_inputs, sizeof(OrtValue *));
    static uint8_t empty[8]; /* a zero-element tensor still needs a data pointer */
    for (uint32_t i = 0; i < q->n_inputs; i++) {
        int64_t dims[64];
        if (element_size(q->in_types[i]) == 0) { /* ORT would read a string tensor's bytes as objects */
            fail_text(res, ST_BAD_REQUEST, "an input's element type is not carried by the host protocol");
            break;
        }
        memcpy(dims, q->in_dims[i], 8 * (size_t)q->in_ranks[i]);
        void *data = q->in_len[i] ? (void *)q->in_data[i] : empty;
        if (failed(g_ort->CreateTensorWithDataAsOrtValue(g_cpu, data, q->in_len[i], dims, q->in_ranks[i],
                                                         (ONNXTensorElementDataType)q->in_types[i], &values[i]),
                   res, ST_RUN))
            break;
    }
    return values;
}

/* Appends one output tensor to res->outputs; false (with the run error set) when it is not a
 * tensor this protocol carries. */
static int encode_output(const char *name, OrtValue *value, RunResult *res)
{
    int is_tensor = 0;
    OrtTensorTypeAndShapeInfo *info = NULL;
    if (failed(g_ort->IsTensor(value, &is_tensor), res, ST_RUN)) return 0;
    if (!is_tensor) {
        fail_text(res, ST_RUN, "an output is not a tensor (sequences and maps are not carried)");
        return 0;
    }
    if (failed(g_ort->GetTensorTypeAndShape(value, &info), res, ST_RUN)) return 0;
    ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
    size_t rank = 0, count = 0;
    int64_t dims[64];
    void *data = NULL;
    int bad = failed(g_ort->GetTensorElementType(info, &type), res, ST_RUN) ||
              failed(g_ort->GetDimensionsCount(info, &rank), res, ST_RUN);
    if (!bad && (rank > 64 || element_size(type) == 0)) {
        fail_text(res, ST_RUN, "an output's element type or rank is not carried by the host protocol");
        bad = 1;
    }
    bad = bad || failed(g_ort->GetDimensions(info, dims, rank), res, ST_RUN) ||
          failed(g_ort->GetTensorShapeElementCount(info, &count), res, ST_RUN) ||
          (count && failed(g_ort->GetTensorMutableData(value, &data), res, ST_RUN));
    g_ort->ReleaseTensorTypeAndShapeInfo(info);
    if (bad) return 0;
    put_str(&res->outputs, name);
    put_i32(&res->outputs, (int32_t)type);
    put_u32(&res->outputs, (uint32_t)rank);
    for (size_t d = 0; d < rank; d++) put_i64(&res->outputs, dims[d]);
    put_blob(&res->outputs, data, count * element_size(type));
    res->n_outputs++;
    return 1;
}

static void run_session(OrtSession *session, const RunRequest *q, RunResult *res)
{
    size_t n_out = 0;
    if (failed(g_ort->SessionGetOutputCount(session, &n_out), res, ST_RUN)) return;
    char **out_names = xcalloc(n_out, sizeof(char *));
    OrtValue **outputs = xcalloc(n_out, sizeof(OrtValue *));
    OrtValue **inputs = make_inputs(q, res);
    int bad = res->status != ST_OK;
    for (size_t i = 0; !bad && i < n_out; i++)
        bad = failed(g_ort->SessionGetOutputName(session, i, g_alloc, &out_names[i]), res, ST_RUN);
    if (!bad) {
        double t0 = now_s();
        bad = failed(g_ort->Run(session, NULL, (const char *const *)q->in_names, (const OrtValue *const *)inputs,
                                q->n_inputs, (const char *const *)out_names, n_out, outputs),
                     res, ST_RUN);
        res->run_s = now_s() - t0;
    }
    for (size_t i = 0; !bad && i < n_out; i++) bad = !encode_output(out_names[i], outputs[i], res);
    if (bad) {
        res->outputs.len = 0;
        res->n_outputs = 0;
    }
    for (size_t i = 0; i < n_out; i++) {
        if (outputs[i]) g_ort->ReleaseValue(outputs[i]);
        if (out_names[i]) g_alloc->Free(g_alloc, out_names[i]);
    }
    for (uint32_t i = 0; i < q->n_inputs; i++)
        if (inputs[i]) g_ort->ReleaseValue(inputs[i]);
    free(out_names);
    free(outputs);
    free(inputs);
}

/* Node -> EP as recorded at partitioning (session.record_ep_graph_assignment_info=1); needs
 * OrtApi >= 24 in both the header this was compiled with and the runtime. */
static void read_assignment(OrtSession *session, RunResult *res)
{
#if ORT_API_VERSION >= 24
    if (!has_assignment_info()) return;
    const OrtEpAssignedSubgraph *const *subgraphs = NULL;
    size_t n = 0;
    OrtStatus *st = g_ort->Session_GetEpGraphAssignmentInfo(session, &subgraphs, &n);
    if (st) { /* not recorded for this session: not an error of the run */
        g_ort->ReleaseStatus(st);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const char *ep = NULL;
        const OrtEpAssignedNode *const *nodes = NULL;
        size_t n_nodes = 0;
        if ((st = g_ort->EpAssignedSubgraph_GetEpName(subgraphs[i], &ep)) ||
            (st = g_ort->EpAssignedSubgraph_GetNodes(subgraphs[i], &nodes, &n_nodes))) {
            g_ort->ReleaseStatus(st);
            continue;
        }
        put_str(&res->assignment, ep);
        put_u32(&res->assignment, (uint32_t)n_nodes);
        for (size_t k = 0; k < n_nodes; k++) {
            const char *name = "", *op = "";
            if ((st = g_ort->EpAssignedNode_GetName(nodes[k], &name))) g_ort->ReleaseStatus(st);
            if ((st = g_ort->EpAssignedNode_GetOperatorType(nodes[k], &op))) g_ort->ReleaseStatus(st);
            put_str(&res->assignment, name);
            put_str(&res->assignment, op);
        }
        res->n_subgraphs++;
    }
    res->has_assignment = 1;
#else
    (void)session;
    (void)res;
#endif
}

/* Ends profiling, moves the trace file's text into res->profile and deletes the file. */
static void read_profile(OrtSession *session, RunResult *res)
{
    char *path = NULL;
    OrtStatus *st = g_ort->SessionEndProfiling(session, g_alloc, &path);
    if (st) {
        g_ort->ReleaseStatus(st);
        return;
    }
    WCHAR *wpath = wide_from_utf8(path);
    FILE *f = _wfopen(wpath, L"rb");
    if (f) {
        char chunk[65536];
        size_t n;
        while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) buf_put(&res->profile, chunk, n);
        fclose(f);
    }
    DeleteFileW(wpath);
    free(wpath);
    g_alloc->Free(g_alloc, path);
}

static void handle_run(Reader *r, Buf *resp)
{
    RunRequest q = {0};
    RunResult res = {0};
    if (!parse_run(r, &q)) {
        fail_text(&res, ST_BAD_REQUEST, "malformed RUN request");
    } else if (!g_ort) {
        fail_text(&res, ST_BUILD, g_ort_error);
    } else {
        double t0 = now_s();
        OrtSessionOptions *opts = make_options(&q, &res);
        OrtSession *session = NULL;
        res.options_s = now_s() - t0;
        if (opts) {
            t0 = now_s();
            failed(g_ort->CreateSessionFromArray(g_env, q.model, q.model_len, opts, &session), &res, ST_BUILD);
            res.build_s = now_s() - t0;
            g_ort->ReleaseSessionOptions(opts);
        }
        if (session) {
            run_session(session, &q, &res);
            t0 = now_s();
            read_assignment(session, &res);
            if (q.profile) read_profile(session, &res);
            g_ort->ReleaseSession(session);
            res.finish_s = now_s() - t0;
        }
        delete_traces();
    }
    put_u8(resp, (uint8_t)res.status);
    put_u8(&res.message, 0);
    put_str(resp, (const char *)res.message.data);
    put_f64(resp, res.options_s);
    put_f64(resp, res.build_s);
    put_f64(resp, res.run_s);
    put_f64(resp, res.finish_s);
    put_u32(resp, res.n_outputs);
    buf_put(resp, res.outputs.data, res.outputs.len);
    put_strn(resp, (const char *)res.profile.data, res.profile.len);
    put_u8(resp, (uint8_t)res.has_assignment);
    put_u32(resp, res.n_subgraphs);
    buf_put(resp, res.assignment.data, res.assignment.len);
    free(res.message.data);
    free(res.outputs.data);
    free(res.profile.data);
    free(res.assignment.data);
    free_run(&q);
}

/* ------------------------------------------------------------------------------------------ */

/* Closes the request's stderr: everything before this line, since the last one, was written
 * while serving it (Wine's and vkd3d's messages go straight to the same file). */
static void mark_end_of_request(void)
{
    static const char line[] = "\n" END_MARKER "\n";
    DWORD put = 0;
    WriteFile(GetStdHandle(STD_ERROR_HANDLE), line, sizeof line - 1, &put, NULL);
}

/* One request frame -> one response frame; false on QUIT. */
static int serve_one(const uint8_t *frame, size_t len)
{
    Reader r = {frame, len, 0};
    Buf resp = {0};
    uint8_t type = get_u8(&r);
    int keep_going = 1;
    if (type == REQ_HELLO) {
        Buf json = {0};
        hello_json(&json);
        put_u8(&resp, ST_OK);
        put_str(&resp, "");
        put_strn(&resp, (const char *)json.data, json.len);
        free(json.data);
    } else if (type == REQ_RUN) {
        handle_run(&r, &resp);
    } else if (type == REQ_QUIT) {
        put_u8(&resp, ST_OK);
        put_str(&resp, "");
        keep_going = 0;
    } else if (type == REQ_TEST_ABORT) {
        abort();
    } else if (type == REQ_TEST_STALL) {
        Sleep(get_u32(&r));
        put_u8(&resp, ST_OK);
        put_str(&resp, "");
    } else {
        put_u8(&resp, ST_BAD_REQUEST);
        put_str(&resp, "unknown request type");
    }
    mark_end_of_request();
    send_frame(&resp);
    free(resp.data);
    return keep_going;
}

static int serve(void)
{
    for (;;) {
        uint64_t len = 0;
        if (!read_exact(&len, 8)) return 0; /* stdin closed: the client is done */
        if (len > ((uint64_t)1 << 40)) {
            fputs("host: request frame length out of range\n", stderr);
            return 2;
        }
        uint8_t *frame = malloc(len ? (size_t)len : 1);
        if (!frame) {
            fputs("host: no memory for a request frame\n", stderr);
            return 3;
        }
        int ok = read_exact(frame, (size_t)len);
        int more = ok && serve_one(frame, (size_t)len);
        free(frame);
        if (!ok) return 2; /* a torn frame: the client died mid-write */
        if (!more) return 0;
    }
}

int main(int argc, char **argv)
{
    int hello_only = argc > 1 && strcmp(argv[1], "--hello") == 0;
    g_in = GetStdHandle(STD_INPUT_HANDLE);
    g_out = GetStdHandle(STD_OUTPUT_HANDLE);
    if (!hello_only) {
        /* Before any DLL loads (ORT's C runtime reads the standard handles when it starts):
         * anything printed from here on goes to stderr, never into the frames. The frames keep
         * a duplicate of the handle, since pointing C's fd 1 at stderr closes the original. */
        HANDLE self = GetCurrentProcess();
        if (!DuplicateHandle(self, g_out, self, &g_out, 0, FALSE, DUPLICATE_SAME_ACCESS)) return 5;
        SetStdHandle(STD_OUTPUT_HANDLE, GetStdHandle(STD_ERROR_HANDLE));
        _dup2(2, 1);
    }
    /* Never let a fault open a dialog or wait for a debugger: crash, and let the client see it. */
    SetErrorMode(SEM_FAILCRITICALERRORS | SEM_NOGPFAULTERRORBOX | SEM_NOOPENFILEERRORBOX);
    start_d3d12();
    load_ort();
    if (hello_only) {
        Buf json = {0};
        hello_json(&json);
        put_u8(&json, '\n');
        write_exact(json.data, json.len);
        return g_ort ? 0 : 1;
    }
    return serve();
}
