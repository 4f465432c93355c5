/* Optional compiled loops of the ROI_ALIGN reference and its bounds.
 *
 * pip builds this file as an extension module where the machine has a C compiler, and
 * reference/native.py loads it with ctypes; without one the NumPy code runs instead. The file is
 * built with -ffp-contract=off (no fused multiply-add) and without -ffast-math, and C evaluates
 * float expressions in float on the targets this runs on (FLT_EVAL_METHOD 0).
 *
 * The bounds loop (linear_average_bounds) performs the same IEEE operations, on the same operands
 * and in the same order, as the NumPy code it stands in for: its results are equal bit for bit.
 * The values loop (separable_average) computes the same float64 products as the NumPy code's BLAS
 * calls, in another order (BLAS's order is its own), so its float64 elements agree with NumPy's
 * within float64 rounding, not bit for bit; the float32 or float16 output rounded from them can
 * differ only where an element lies within that rounding of a rounding boundary of the output
 * type. tests/reference/test_native_kernels.py checks both contracts on every ROI_ALIGN case of
 * the catalog and on drawn ones.
 */
/* Built by pip as an extension module (hence Python.h and the module's init function below) and
   loaded with ctypes. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD != 0
/* float arithmetic carried out in a wider type (x87): the results would not be float32's own. The
   build fails, pip leaves the extension out, and the reference runs in NumPy. */
#error "float expressions must be evaluated in float (FLT_EVAL_METHOD 0)"
#endif

#if defined(_MSC_VER)
#define restrict __restrict
#endif

#if defined(_WIN32)
#define EXPORT __declspec(dllexport)
#else
#define EXPORT __attribute__((visibility("default")))
#endif

/* The interface's version: reference/native.py loads a library only when this equals its own
   ABI, so a build of an older source (other arguments) is never called. Raise both together. */
EXPORT int native_kernels_abi(void) { return 4; }

/* roi_align_bounds._bulk_regions for LINEAR samples reduced by AVERAGE, on a finite float32
 * plane, for regions no coordinate of which rounding can move into another cell: per sample
 * (_pair_slopes, _combine), in the slopes' type T (float, or double where float32 could round
 * the differences: FLOAT16 inputs, values near FLT_MAX; roi_align_bounds._slope_type)
 *     Gx = max(|t01 - t00|, |t11 - t10|),  Gy = max(|t10 - t00|, |t11 - t01|)
 *     s  = (Gx * x_weight + Gy * y_weight) + |t00| * k          (in T, in that order)
 * or `outside` for a sample that does not read the input; per output element the sum of its
 * samples' s in T, Y outer and X inner, from 0 (np.add.reduce over both sample axes), divided by
 * m = n_y * n_x (float: in double and rounded when m is not a power of two, else in float;
 * double: in double), then rounded to float. Region r's bounds go to bound[rows[r]], laid out
 * (channels, out_h, out_w). Where `values` is not NULL (a float32 output, laid out as `bound`),
 * each bound is then made the comparison's allowance as precision.output_rounding makes it:
 * ((|value| + bound) * eps_up + bound) * up + tiny, in float32, 0 where that is not finite.
 *
 * y_pairs: (regions, out_h * n_y, 2) the taps each Y coordinate interpolates between (rows of
 * the plane); x_pairs likewise (columns); y_weight (regions, out_h * n_y): e_y + 2k in T;
 * y_inside: whether the coordinate reads the input. Returns 0, or -1 when out of memory. */
#define LINEAR_AVERAGE_BOUNDS(NAME, T, ABS, MEAN)                                                                     \
    EXPORT int NAME(const float *restrict plane, int64_t width, int64_t channels, int64_t regions, int64_t out_h,    \
                    int64_t out_w, int64_t n_y, int64_t n_x, const int64_t *restrict y_pairs,                        \
                    const int64_t *restrict x_pairs, const T *restrict y_weight, const T *restrict x_weight, T k,    \
                    const uint8_t *restrict y_inside, const uint8_t *restrict x_inside, float outside,               \
                    const int64_t *restrict rows, float *restrict bound, const float *values, float eps_up,          \
                    float up, float tiny) {                                                                          \
        T *acc = malloc(sizeof(T) * (size_t)(channels > 0 ? channels : 1));                                        \
        if (acc == NULL) return -1;                                                                                  \
        const int64_t sy_count = out_h * n_y, sx_count = out_w * n_x, m = n_y * n_x;                                 \
        const int power_of_two = (m & (m - 1)) == 0;                                                                 \
        (void)power_of_two;                                                                                          \
        for (int64_t r = 0; r < regions; r++) {                                                                      \
            const int64_t *ys = y_pairs + r * sy_count * 2, *xs = x_pairs + r * sx_count * 2;                        \
            const T *wy = y_weight + r * sy_count, *wx = x_weight + r * sx_count;                                    \
            const uint8_t *in_y = y_inside + r * sy_count, *in_x = x_inside + r * sx_count;                          \
            float *out = bound + rows[r] * channels * out_h * out_w;                                                 \
            for (int64_t oh = 0; oh < out_h; oh++) {                                                                 \
                for (int64_t ow = 0; ow < out_w; ow++) {                                                             \
                    memset(acc, 0, sizeof(T) * (size_t)channels);                                                   \
                    for (int64_t a = oh * n_y; a < (oh + 1) * n_y; a++) {                                            \
                        const float *row0 = plane + ys[2 * a] * width * channels;                                    \
                        const float *row1 = plane + ys[2 * a + 1] * width * channels;                                \
                        const T cy = wy[a];                                                                          \
                        for (int64_t b = ow * n_x; b < (ow + 1) * n_x; b++) {                                        \
                            if (!(in_y[a] && in_x[b])) {                                                             \
                                for (int64_t c = 0; c < channels; c++) acc[c] += (T)outside;                         \
                                continue;                                                                            \
                            }                                                                                        \
                            const float *restrict p00 = row0 + xs[2 * b] * channels;                                 \
                            const float *restrict p01 = row0 + xs[2 * b + 1] * channels;                             \
                            const float *restrict p10 = row1 + xs[2 * b] * channels;                                 \
                            const float *restrict p11 = row1 + xs[2 * b + 1] * channels;                             \
                            const T cx = wx[b];                                                                      \
                            for (int64_t c = 0; c < channels; c++) {                                                 \
                                const T t00 = p00[c], t01 = p01[c], t10 = p10[c], t11 = p11[c];                      \
                                const T gx = ABS(t01 - t00) >= ABS(t11 - t10) ? ABS(t01 - t00) : ABS(t11 - t10);     \
                                const T gy = ABS(t10 - t00) >= ABS(t11 - t01) ? ABS(t10 - t00) : ABS(t11 - t01);     \
                                T s = gx * cx;                                                                       \
                                s = s + gy * cy;                                                                     \
                                s = s + ABS(t00) * k;                                                                \
                                acc[c] += s;                                                                         \
                            }                                                                                        \
                        }                                                                                            \
                    }                                                                                                \
                    for (int64_t c = 0; c < channels; c++) {                                                         \
                        const int64_t at = (c * out_h + oh) * out_w + ow;                                            \
                        const float mean = MEAN(acc[c], m);                                                          \
                        if (values == NULL) {                                                                        \
                            out[at] = mean;                                                                          \
                            continue;                                                                                \
                        }                                                                                            \
                        float total = fabsf(values[rows[r] * channels * out_h * out_w + at]) + mean;                 \
                        total = total * eps_up;                                                                      \
                        total = total + mean;                                                                        \
                        total = total * up;                                                                          \
                        total = total + tiny;                                                                        \
                        out[at] = isfinite(total) ? total : 0.0f;                                                    \
                    }                                                                                                \
                }                                                                                                    \
            }                                                                                                        \
        }                                                                                                            \
        free(acc);                                                                                                   \
        return 0;                                                                                                    \
    }

/* float: a power of two divides exactly in float; another m in double, rounded once */
#define FLOAT_MEAN(sum, m) (power_of_two ? (sum) / (float)(m) : (float)((double)(sum) / (double)(m)))
/* double: every m in double, the quotient rounded to float as it is stored */
#define DOUBLE_MEAN(sum, m) ((float)((sum) / (double)(m)))

LINEAR_AVERAGE_BOUNDS(linear_average_bounds, float, fabsf, FLOAT_MEAN)
LINEAR_AVERAGE_BOUNDS(linear_average_bounds_f64, double, fabs, DOUBLE_MEAN)

/* roi_align.average_linear on a finite float32 plane (H, W, C), for R regions at n_y x n_x samples
 * per element: region r's elements (out_h, out_w, C) are Ay . P . Ax^T over the rows and columns
 * its samples touch (roi_align.AxisWeights), plus `added` (the samples that read
 * OutOfBoundsInputValue, times it; NULL: none), divided by m = n_y * n_x, all in double.
 *
 * wy: every region's (out_h, rows) Y weights one after another, region r's from out_h *
 * y_start[r]; y_taps[y_start[r] + i]: the plane row of tap i; likewise wx, x_taps, x_start for
 * columns. rows[r], cols[r]: the taps region r reads on each axis (0 on both when either has
 * none). Products of a zero weight are skipped: on a finite plane they add +0, which changes no
 * sum that starts from +0. The elements go to total (R, out_h, out_w, C) or, where out32 is not
 * NULL, rounded to float into out32[out_rows[r]], laid out (C, out_h, out_w), as NumPy's
 * assignment of a float64 array to a float32 one rounds them (total is not written then).
 * Returns 0, or -1 when out of memory. */
EXPORT int separable_average(const float *restrict plane, int64_t width, int64_t channels, int64_t regions,
                             int64_t out_h, int64_t out_w, const double *restrict wy,
                             const int64_t *restrict y_taps, const int64_t *restrict y_start,
                             const double *restrict wx, const int64_t *restrict x_taps,
                             const int64_t *restrict x_start, const int64_t *restrict rows,
                             const int64_t *restrict cols, const double *added, double m, double *total,
                             float *out32, const int64_t *out_rows) {
    const int64_t line_size = out_w * channels, elements = out_h * out_w;
    /* one Y tap's row taken across: (out_w, C), used by every output row before the next tap's;
       then, where out32 is given, the region's elements before they are rounded */
    double *across = malloc(sizeof(double) * (size_t)(line_size > 0 ? line_size : 1));
    double *scratch = out32 == NULL ? NULL : malloc(sizeof(double) * (size_t)(elements * channels > 0 ? elements * channels : 1));
    if (across == NULL || (out32 != NULL && scratch == NULL)) {
        free(across);
        free(scratch);
        return -1;
    }
    for (int64_t r = 0; r < regions; r++) {
        double *region = out32 == NULL ? total + r * out_h * line_size : scratch;
        const int64_t height_r = rows[r], width_r = cols[r];
        const double *wy_r = wy + out_h * y_start[r], *wx_r = wx + out_w * x_start[r];
        const int64_t *ys = y_taps + y_start[r], *xs = x_taps + x_start[r];
        for (int64_t t = 0; t < out_h * line_size; t++) region[t] = 0.0;
        /* each output row's sum over the Y taps in ascending order, as a product with Ay adds */
        for (int64_t i = 0; i < height_r; i++) {
            const float *line = plane + ys[i] * width * channels;
            for (int64_t ow = 0; ow < out_w; ow++) {
                double *restrict acc = across + ow * channels;
                for (int64_t c = 0; c < channels; c++) acc[c] = 0.0;
                for (int64_t j = 0; j < width_r; j++) {
                    const double w = wx_r[ow * width_r + j];
                    if (w == 0.0) continue;
                    const float *restrict p = line + xs[j] * channels;
                    for (int64_t c = 0; c < channels; c++) acc[c] += w * (double)p[c];
                }
            }
            for (int64_t oh = 0; oh < out_h; oh++) {
                const double w = wy_r[oh * height_r + i];
                if (w == 0.0) continue;
                double *restrict out = region + oh * line_size;
                for (int64_t t = 0; t < line_size; t++) out[t] += w * across[t];
            }
        }
        for (int64_t e = 0; e < out_h * out_w; e++) {
            double *restrict element = region + e * channels;
            if (added != NULL) {
                const double extra = added[r * out_h * out_w + e];
                for (int64_t c = 0; c < channels; c++) element[c] += extra;
            }
            for (int64_t c = 0; c < channels; c++) element[c] /= m;
        }
        if (out32 != NULL) {
            float *out = out32 + out_rows[r] * channels * elements;
            for (int64_t e = 0; e < elements; e++)
                for (int64_t c = 0; c < channels; c++) out[c * elements + e] = (float)region[e * channels + c];
        }
    }
    free(across);
    free(scratch);
    return 0;
}

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native_kernels",
                                    "The reference's compiled loops: loaded with ctypes (reference/native.py).", -1,
                                    NULL, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__native_kernels(void) { return PyModule_Create(&module); }
