#!/usr/bin/env python3
"""Lists the uses of Linux-only interfaces outside the per-platform files.
The per-platform files are lib/platform/<platform>.c and lib/*/*_<platform>.c
for linux, darwin and posix (lib/platform/platform.h): every other file of
the tree must build and run on any POSIX system. Comments do not count;
strings do (a "/proc/..." path is a use). Usage: check-platform.py ROOT;
prints FILE:LINE: NAME per hit and exits 1 when there is any."""
import os
import re
import sys

# What exists only on Linux: the names the portable core must not use.
LINUX_ONLY = [
    r"epoll_\w*", r"sys/epoll\.h", r"prctl", r"sys/prctl\.h", r"PR_SET_\w+",
    r"/proc/", r"pipe2\s*\(", r"accept4\s*\(", r"mkostemp", r"timerfd_\w*",
    r"signalfd", r"eventfd", r"sched_[gs]etaffinity", r"MHD_USE_EPOLL\w*",
    r"SOCK_NONBLOCK", r"SOCK_CLOEXEC", r"MSG_NOSIGNAL", r"sys/sysinfo\.h",
]
PATTERN = re.compile("|".join("(%s)" % p for p in LINUX_ONLY))
DIRS = ["lib", "src", "server", "engine", "include"]
PLATFORM_FILE = re.compile(r"^(lib/platform/(linux|darwin|posix)\.c|lib/[^/]+/[^/]+_(linux|darwin|posix)\.c)$")


def strip_comments(src):
    """Blanks /* */ and // comments, keeping strings and line numbers."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if c == '"' or c == "'":
            j = i + 1
            while j < n and src[j] != c and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            out.append(src[i:j + 1])
            i = j + 1
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def hits(root):
    for d in DIRS:
        for dirpath, _, files in os.walk(os.path.join(root, d)):
            for f in sorted(files):
                if not f.endswith((".c", ".h")):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root)
                if PLATFORM_FILE.match(rel):
                    continue
                with open(path, encoding="utf-8", errors="replace") as fh:
                    text = strip_comments(fh.read())
                for ln, line in enumerate(text.split("\n"), 1):
                    for m in PATTERN.finditer(line):
                        yield "%s:%d: %s" % (rel, ln, m.group(0))


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    found = list(hits(root))
    for h in found:
        print(h)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
