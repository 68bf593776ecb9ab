/* Number text in libcaliper does not follow the host program's locale: with
 * a de_DE locale set process-wide (decimal comma), units parse and print,
 * the /metrics parser, the telemetry parsers, the SVG, HTML, Markdown, CSV
 * and JSON writers give exactly what they give under C, and the host's
 * locale is as it set it once a library call returns. The de_DE locale is
 * built with localedef into a temporary LOCPATH (Debian package "locales";
 * `make deps` installs it). */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <locale.h>
#include <cmocka.h>
#include "platform_skip.h"
#include "caliper/buf.h"
#include "caliper/error.h"
#include "caliper/global.h"
#include "caliper/prom.h"
#include "caliper/report.h"
#include "caliper/telemetry.h"
#include "caliper/units.h"
#include "lib/report/svg.h"
#include "lib/util/c_locale.h"
#include "report_demo.h"

#define DE "de_DE.UTF-8"
static char g_dir[] = "/tmp/caliper-locale-XXXXXX";

static int build_de(void **st)
{
    (void)st;
    if (!mkdtemp(g_dir)) return -1;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "localedef -i de_DE -f UTF-8 %s/%s >/dev/null 2>&1", g_dir, DE);
    int rc = system(cmd);   /* exits 1 on mere warnings: judge by the result */
    (void)rc;
    char p[300];
    snprintf(p, sizeof p, "%s/%s/LC_NUMERIC", g_dir, DE);
    struct stat sb;
    if (stat(p, &sb) != 0) {
        fprintf(stderr, "test_locale: localedef could not build %s (install the Debian "
                        "package \"locales\": make deps)\n", DE);
        return -1;
    }
    setenv("LOCPATH", g_dir, 1);
    if (!setlocale(LC_ALL, DE)) {
        fprintf(stderr, "test_locale: setlocale(LC_ALL, \"%s\") failed with LOCPATH=%s\n", DE, g_dir);
        return -1;
    }
    setlocale(LC_ALL, "C");
    return cal_global_init() == CAL_OK ? 0 : -1;
}

static int remove_de(void **st)
{
    (void)st;
    setlocale(LC_ALL, "C");
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Switch the whole process to de_DE and prove the hazard is real: the C
 * library itself now writes and reads a decimal comma. */
static void to_de(void)
{
    assert_non_null(setlocale(LC_ALL, DE));
    char b[16];
    snprintf(b, sizeof b, "%.1f", 2.5);
    assert_string_equal(b, "2,5");
    char *end;
    assert_true(strtod("1.5", &end) == 1.0);
}

static void to_c(void) { assert_non_null(setlocale(LC_ALL, "C")); }

/* The host's locale is what it set: a library call switched back. */
static void host_still_de(void)
{
    char b[16];
    snprintf(b, sizeof b, "%.2f", 0.25);
    assert_string_equal(b, "0,25");
}

static void test_units(void **st)
{
    (void)st;
    double v[4];
    char c_out[4][32], de_out[4][32];
    const double fmt_in[4] = {0.0125, 2.7e9, 1.133e12, 0.4375};
    const cal_unit fmt_u[4] = {CAL_U_TIME, CAL_U_BYTES, CAL_U_BANDWIDTH, CAL_U_RATIO};
    for (int i = 0; i < 4; i++) cal_unit_format(fmt_u[i], fmt_in[i], 3, c_out[i], 32);
    assert_string_equal(c_out[0], "12.5 ms");
    assert_string_equal(c_out[1], "2.70 GB");

    to_de();
    assert_int_equal(cal_unit_parse(CAL_U_TIME, "1.5s", NULL, &v[0]), CAL_OK);
    assert_true(v[0] == 1.5);
    assert_int_equal(cal_unit_parse(CAL_U_BYTES, "2.7GB", NULL, &v[1]), CAL_OK);
    assert_true(v[1] == 2.7e9);
    assert_int_equal(cal_unit_parse(CAL_U_RATIO, "5.5%", NULL, &v[2]), CAL_OK);
    assert_true(fabs(v[2] - 0.055) < 1e-15);
    assert_int_equal(cal_unit_parse(CAL_U_TIME, "250", "ms", &v[3]), CAL_OK);
    assert_true(v[3] == 0.25);
    /* a comma is not a decimal point to the library, in any locale */
    assert_int_equal(cal_unit_parse(CAL_U_TIME, "1,5s", NULL, &v[0]), CAL_EINVAL);
    for (int i = 0; i < 4; i++) {
        cal_unit_format(fmt_u[i], fmt_in[i], 3, de_out[i], 32);
        assert_string_equal(de_out[i], c_out[i]);
    }
    char *end;
    assert_true(cal_strtod("2.5e-3x", &end) == 2.5e-3);
    assert_int_equal(*end, 'x');
    char b[32];
    cal_snprintf(b, sizeof b, "%.3f|%g", 1.25, 0.5);
    assert_string_equal(b, "1.250|0.5");
    cal_buf cb = CAL_BUF_INIT(256);
    assert_int_equal(cal_buf_printf(&cb, "<x v=\"%.1f\"/>", 12.5), CAL_OK);
    assert_string_equal(cb.data, "<x v=\"12.5\"/>");
    cal_buf_free(&cb);
    host_still_de();
    to_c();
}

typedef struct prom_seen { double v[64]; size_t n; } prom_seen;
static int collect(void *ud, const cal_prom_sample *s)
{
    prom_seen *p = ud;
    if (p->n < 64) p->v[p->n++] = s->value;
    return 0;
}

static void test_prom(void **st)
{
    (void)st;
    static const char text[] =
        "# TYPE vllm:num_requests_running gauge\n"
        "vllm:num_requests_running{model_name=\"m\"} 2.5\n"
        "vllm:num_requests_waiting{model_name=\"m\"} 0.125\n"
        "vllm:gpu_cache_usage_perc{model_name=\"m\"} 1.5e-1\n"
        "vllm:e2e_request_latency_seconds_bucket{le=\"0.3\"} 7\n";
    prom_seen c = {{0}, 0}, d = {{0}, 0};
    assert_int_equal(cal_prom_parse(text, sizeof text - 1, collect, &c, NULL, NULL, 0), CAL_OK);
    to_de();
    size_t bad = 0;
    char why[200] = "";
    assert_int_equal(cal_prom_parse(text, sizeof text - 1, collect, &d, &bad, why, sizeof why), CAL_OK);
    assert_int_equal(d.n, 4);
    assert_int_equal(c.n, d.n);
    assert_true(d.v[0] == 2.5);
    assert_true(d.v[1] == 0.125);
    assert_true(d.v[2] == 0.15);
    for (size_t i = 0; i < c.n; i++) assert_true(c.v[i] == d.v[i]);
    cal_prom_load load;
    assert_int_equal(cal_prom_find_load(text, sizeof text - 1, NULL, &load, NULL, NULL, 0), CAL_OK);
    assert_true(load.has_running && load.running == 2.5);
    host_still_de();
    to_c();
}

static void svg_render(cal_buf *b)
{
    static const double x[] = {1, 2.5, 4.25, 8};
    static const double y[] = {12.5, 3.25, 7.75, 0.5};
    svg_panel p;
    memset(&p, 0, sizeof p);
    p.x0 = 40.5; p.y0 = 10.25; p.w = 300.5; p.h = 150.75;
    p.x = (svg_axis){.label = "concurrency", .unit = "", .min = NAN, .max = NAN, .log2 = 1};
    p.y = (svg_axis){.label = "throughput", .unit = "tok/s", .min = NAN, .max = NAN, .zero = 1};
    p.s[0] = (svg_series){.name = "agg", .x = x, .y = y, .n = 4, .style = SVG_LINE_POINTS};
    p.ns = 1;
    p.x_tick_labels = 1;
    assert_int_equal(svg_begin(b, 400.5, 200.25, "chart"), CAL_OK);
    assert_int_equal(svg_panel_write(b, &p), CAL_OK);
    assert_int_equal(svg_end(b), CAL_OK);
}

/* No number inside an attribute written with a decimal comma: `="12,5"`. */
static int has_comma_number(const char *s)
{
    for (const char *p = strchr(s, ','); p; p = strchr(p + 1, ','))
        if (p > s && p[-1] >= '0' && p[-1] <= '9' && p[1] >= '0' && p[1] <= '9') {
            const char *q = p;
            while (q > s && ((q[-1] >= '0' && q[-1] <= '9') || q[-1] == '-')) q--;
            if (q > s && (q[-1] == '"' || q[-1] == ' ' || q[-1] == '>')) return 1;
        }
    return 0;
}

/* svg.c numbers clip paths from one counter for the process (ids unique
 * across the SVGs of one page), so two renders differ there by design:
 * drop the digits of `id="cN"` and `url(#cN)` before comparing. */
static void drop_clip_ids(cal_buf *b)
{
    size_t w = 0;
    for (size_t r = 0; r < b->len;) {
        int at_id = !strncmp(b->data + r, "id=\"c", 5), at_url = !strncmp(b->data + r, "url(#c", 6);
        if (at_id || at_url) {
            size_t k = at_id ? 5 : 6;
            memmove(b->data + w, b->data + r, k);
            w += k;
            r += k;
            while (r < b->len && b->data[r] >= '0' && b->data[r] <= '9') r++;
            continue;
        }
        b->data[w++] = b->data[r++];
    }
    b->len = w;
    b->data[w] = '\0';
}

static void test_svg(void **st)
{
    (void)st;
    cal_buf c = CAL_BUF_INIT(1 << 20), d = CAL_BUF_INIT(1 << 20);
    svg_render(&c);
    assert_non_null(strstr(c.data, "cx=\""));
    assert_non_null(strstr(c.data, ".5"));
    to_de();
    svg_render(&d);
    host_still_de();
    to_c();
    assert_false(has_comma_number(d.data));
    drop_clip_ids(&c);
    drop_clip_ids(&d);
    assert_int_equal(c.len, d.len);
    assert_memory_equal(c.data, d.data, c.len);
    cal_buf_free(&c);
    cal_buf_free(&d);
}

static void render_all(cal_result *r, cal_buf out[5])
{
    const cal_result *rs[1] = {r};
    const cal_report_format f[4] = {CAL_REPORT_HTML, CAL_REPORT_MD, CAL_REPORT_CSV, CAL_REPORT_JSON};
    for (int i = 0; i < 4; i++) {
        out[i] = (cal_buf)CAL_BUF_INIT(16 << 20);
        assert_int_equal(cal_report_write(rs, 1, f[i], &out[i]), CAL_OK);
    }
    out[4] = (cal_buf)CAL_BUF_INIT(16 << 20);
    assert_int_equal(cal_result_to_json(r, &out[4]), CAL_OK);
}

static void test_reports(void **st)
{
    (void)st;
    cal_result *r = demo_result("demo", 1.0, 1);
    assert_non_null(r);
    cal_buf c[5], d[5];
    render_all(r, c);
    assert_non_null(strstr(c[0].data, "<svg"));
    to_de();
    render_all(r, d);
    /* and the JSON reads back the same under de_DE as under C */
    cal_result *back_de = NULL, *back_c = NULL;
    char why[256] = "";
    assert_int_equal(cal_result_from_json(c[4].data, c[4].len, NULL, &back_de, why, sizeof why),
                     CAL_OK);
    host_still_de();
    to_c();
    static const char *const name[5] = {"html", "md", "csv", "report json", "result json"};
    drop_clip_ids(&c[0]);
    drop_clip_ids(&d[0]);
    for (int i = 0; i < 5; i++) {
        if (c[i].len != d[i].len || memcmp(c[i].data, d[i].data, c[i].len) != 0)
            fail_msg("%s differs under de_DE (%zu vs %zu bytes)", name[i], c[i].len, d[i].len);
        cal_buf_free(&d[i]);
    }
    assert_false(has_comma_number(c[0].data));
    assert_int_equal(cal_result_from_json(c[4].data, c[4].len, NULL, &back_c, why, sizeof why),
                     CAL_OK);
    cal_buf jc = CAL_BUF_INIT(16 << 20), jd = CAL_BUF_INIT(16 << 20);
    assert_int_equal(cal_result_to_json(back_c, &jc), CAL_OK);
    assert_int_equal(cal_result_to_json(back_de, &jd), CAL_OK);
    assert_int_equal(jc.len, jd.len);
    assert_memory_equal(jc.data, jd.data, jc.len);
    cal_buf_free(&jc);
    cal_buf_free(&jd);
    for (int i = 0; i < 5; i++) cal_buf_free(&c[i]);
    cal_result_free(&back_c);
    cal_result_free(&back_de);
    cal_result_free(&r);
}

/* /proc/cpuinfo's "cpu MHz : 2345.678": a fractional reading under de_DE. */
static void test_telemetry_cpuinfo(void **st)
{
    (void)st;
    SKIP_UNLESS_PLATFORM("linux", "the /proc/cpuinfo clock source");
    char root[] = "/tmp/caliper-locale-tel-XXXXXX";
    assert_non_null(mkdtemp(root));
    char p[300];
    snprintf(p, sizeof p, "%s/proc", root);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/proc/cpuinfo", root);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs("processor\t: 0\ncpu MHz\t\t: 2345.678\n\nprocessor\t: 1\ncpu MHz\t\t: 2345.678\n", f);
    fclose(f);
    setenv("CALIPER_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
    to_de();
    cal_tel_config cfg = {.root = root, .only = "cpuinfo"};
    cal_tel *t = NULL;
    assert_int_equal(cal_tel_open(&t, &cfg), CAL_OK);
    const cal_tel_backend_info *bi;
    size_t n = cal_tel_backends(t, &bi);
    const char *reason = NULL;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(bi[i].name, "cpuinfo")) reason = bi[i].reason;
    assert_non_null(reason);
    /* a value that never moves is refused, and the reason quotes it whole */
    if (!strstr(reason, "2345.678")) fail_msg("cpuinfo reason: %s", reason);
    cal_tel_close(&t);
    host_still_de();
    to_c();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
}

static void *parse_in_thread(void *ud)
{
    double *v = ud;
    if (cal_unit_parse(CAL_U_POWER, "60.5W", NULL, v) != CAL_OK) *v = -1;
    return NULL;
}

/* Another thread of a de_DE process: the switch is per thread. */
static void test_thread(void **st)
{
    (void)st;
    to_de();
    double v = 0;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, parse_in_thread, &v), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_true(v == 60.5);
    /* nested pushes restore in order */
    locale_t a = cal_locale_push();
    locale_t b = cal_locale_push();
    char s[16];
    snprintf(s, sizeof s, "%.1f", 2.5);
    assert_string_equal(s, "2.5");
    cal_locale_pop(b);
    cal_locale_pop(a);
    host_still_de();
    to_c();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_units),
        cmocka_unit_test(test_prom),
        cmocka_unit_test(test_svg),
        cmocka_unit_test(test_reports),
        cmocka_unit_test(test_telemetry_cpuinfo),
        cmocka_unit_test(test_thread),
    };
    return cmocka_run_group_tests(tests, build_de, remove_de);
}
