/* caliper reference engine — a file written whole or not at all: the new
 * file beside the old, renamed over it once complete (GGUF export). */
#include "engine/internal.h"
#include "caliper/error.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What kind of thing path names, for a refusal; NULL for a regular file. */
static const char *not_regular(mode_t m)
{
    if (S_ISREG(m)) return NULL;
    if (S_ISLNK(m)) return "a symbolic link";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISDIR(m)) return "a directory";
    if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

/* A new file next to path, to be renamed over it once complete: a reader
 * never sees half a model, a failed export leaves the old file as it was,
 * and the rename replaces a name without following it. An existing path
 * that is not a regular file is refused (writing through a link would
 * overwrite its target; opening a FIFO blocks until a reader comes). The
 * file gets the old file's mode, or what fopen would have given it. */
FILE *cal_open_replacement(const char *path, char *tmp, size_t tmp_len, char *why, size_t why_len,
                           int *rc)
{
    struct stat st;
    mode_t mode;
    if (lstat(path, &st) == 0) {
        const char *kind = not_regular(st.st_mode);
        if (kind) {
            *rc = cal_why(why, why_len, CAL_EINVAL, "\"%s\" is %s, not a regular file",
                          path, kind);
            return NULL;
        }
        mode = st.st_mode & 07777;
    } else if (errno == ENOENT) {
        /* the process's umask, read the only way POSIX offers: set and put back */
        mode_t um = umask(022);
        umask(um);
        mode = 0666 & ~um;
    } else {
        *rc = cal_why(why, why_len, CAL_EIO, "%s: %s", path, strerror(errno));
        return NULL;
    }
    const char *slash = strrchr(path, '/');
    int dlen = slash ? (int)(slash - path) + 1 : 0;
    if ((size_t)snprintf(tmp, tmp_len, "%.*s.%s.XXXXXX", dlen, path,
                         slash ? slash + 1 : path) >= tmp_len) {
        *rc = cal_why(why, why_len, CAL_EINVAL, "%s: path longer than %zu bytes", path,
                      tmp_len - 16);
        return NULL;
    }
    int fd = mkstemp(tmp);
    if (fd < 0) {
        *rc = cal_why(why, why_len, CAL_EIO, "%s: cannot create a file next to it: %s", path,
                      strerror(errno));
        return NULL;
    }
    FILE *f = fchmod(fd, mode) == 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        *rc = cal_why(why, why_len, CAL_EIO, "%s: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
    }
    return f;
}
