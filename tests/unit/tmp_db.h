/* A store file for one test: tmp_db_name turns a template ending in XXXXXX
 * into a fresh, unused path (mkstemp makes the file, which is removed again
 * so the store starts empty), and tmp_db_remove deletes the store with its
 * WAL and shared-memory files. Include after cmocka.h. */
#ifndef CAL_TEST_TMP_DB_H
#define CAL_TEST_TMP_DB_H
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline char *tmp_db_name(char *tmpl)
{
    int fd = mkstemp(tmpl);
    assert_true(fd >= 0);
    close(fd);
    unlink(tmpl);
    return tmpl;
}

static inline void tmp_db_remove(const char *p)
{
    char b[4096];
    unlink(p);
    snprintf(b, sizeof b, "%s-wal", p); unlink(b);
    snprintf(b, sizeof b, "%s-shm", p); unlink(b);
}
#endif
