/* caliper telemetry — small helpers the backends share: paths under the
 * injectable root, whole-file and pread reads, "why absent" texts, the
 * wrapping-counter delta and the NVML reason words. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "caliper/error.h"
#include "tel_internal.h"
#include "lib/util/c_locale.h"

void tel_emit(tel_out *e, const char *unit, double value, const char *fmt, ...)
{
    if (e->n >= e->cap) { e->dropped++; return; }
    cal_tel_sample *s = &e->buf[e->n];
    va_list ap;
    va_start(ap, fmt);
    int w = cal_vsnprintf(s->metric, sizeof s->metric, fmt, ap);
    va_end(ap);
    if (w < 0) { e->dropped++; return; }
    s->t_ns = e->t_ns;
    s->backend = e->backend;
    s->unit = unit;
    s->value = value;
    e->n++;
}

char *tel_path(const tel_ctx *ctx, char *buf, size_t n, const char *fmt, ...)
{
    int w = snprintf(buf, n, "%s", ctx->root);
    if (w < 0 || (size_t)w >= n) { buf[0] = 0; return buf; }
    va_list ap;
    va_start(ap, fmt);
    cal_vsnprintf(buf + w, n - (size_t)w, fmt, ap);
    va_end(ap);
    return buf;
}

int tel_open(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

long tel_read_file(const char *path, char *buf, size_t n)
{
    int fd = tel_open(path);
    if (fd < 0) { if (n) buf[0] = 0; return fd; }
    long r = tel_pread_str(fd, buf, n);
    int e = errno;
    close(fd);
    return r < 0 ? -e : r;
}

long tel_pread_str(int fd, char *buf, size_t n)
{
    if (n == 0) return -1;
    size_t got = 0;
    while (got + 1 < n) {
        ssize_t r = pread(fd, buf + got, n - 1 - got, (off_t)got);
        if (r < 0) { if (errno == EINTR) continue; buf[0] = 0; return -1; }
        if (r == 0) break;
        got += (size_t)r;
    }
    buf[got] = 0;
    return (long)got;
}

int tel_pread_u64(int fd, uint64_t *out)
{
    char b[64];
    if (tel_pread_str(fd, b, sizeof b) <= 0) return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(b, &end, 10);
    if (end == b || errno || b[0] == '-') return -1;
    *out = v;
    return 0;
}

int tel_pread_i64(int fd, int64_t *out)
{
    char b[64];
    if (tel_pread_str(fd, b, sizeof b) <= 0) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(b, &end, 10);
    if (end == b || errno) return -1;
    *out = v;
    return 0;
}

int tel_why_errno(int err, const char *path, const char *grant, char *why, size_t n)
{
    if (err < 0) err = -err;
    if (err == ENOENT || err == ENOTDIR) {
        snprintf(why, n, "no such file: %s", path);
        return CAL_EABSENT;
    }
    if (err == EACCES || err == EPERM) {
        snprintf(why, n, "permission denied: %s%s%s", path, grant ? "; " : "", grant ? grant : "");
        return CAL_EPERM;
    }
    if (err == ENODEV || err == ENXIO) {
        snprintf(why, n, "no device: %s", path);
        return CAL_ENOTFOUND;
    }
    snprintf(why, n, "%s: %s", path, strerror(err));
    return CAL_EIO;
}

void tel_token(const char *s, char *out, size_t n)
{
    size_t j = 0;
    int us = 0;
    for (; *s && j + 1 < n; s++) {
        unsigned char c = (unsigned char)*s;
        if (isalnum(c)) { out[j++] = (char)tolower(c); us = 0; }
        else if (!us && j > 0) { out[j++] = '_'; us = 1; }
    }
    while (j > 0 && out[j - 1] == '_') j--;
    out[j] = 0;
}

void tel_chomp(char *s)
{
    size_t l = strlen(s);
    while (l > 0 && isspace((unsigned char)s[l - 1])) s[--l] = 0;
}

uint64_t cal_tel_wrap_delta(uint64_t prev, uint64_t cur, uint64_t range)
{
    if (cur >= prev) return cur - prev;
    if (range == 0 || prev > range) return 0;   /* reset, not negative energy */
    return range - prev + cur;
}

/* NVML clocks-event reason bits (nvml.h nvmlClocksEventReason*). */
static const struct { uint64_t bit; const char *word; } nvml_words[] = {
    { 0x1ULL,   "GPU idle" },
    { 0x2ULL,   "application clocks" },
    { 0x4ULL,   "SW power cap" },
    { 0x8ULL,   "HW slowdown" },
    { 0x10ULL,  "sync boost" },
    { 0x20ULL,  "SW thermal slowdown" },
    { 0x40ULL,  "HW thermal slowdown" },
    { 0x80ULL,  "HW power brake" },
    { 0x100ULL, "display clock" },
};

char *cal_tel_nvml_reasons(uint64_t mask, char *buf, size_t n)
{
    if (!n) return buf;
    buf[0] = 0;
    if (mask == 0) { snprintf(buf, n, "none"); return buf; }
    size_t w = 0;
    uint64_t known = 0;
    for (size_t i = 0; i < sizeof nvml_words / sizeof nvml_words[0]; i++) {
        known |= nvml_words[i].bit;
        if (!(mask & nvml_words[i].bit)) continue;
        int r = snprintf(buf + w, n - w, "%s%s", w ? ", " : "", nvml_words[i].word);
        if (r < 0 || (size_t)r >= n - w) return buf;
        w += (size_t)r;
    }
    if (mask & ~known)
        snprintf(buf + w, n - w, "%sother 0x%" PRIx64, w ? ", " : "", mask & ~known);
    return buf;
}
