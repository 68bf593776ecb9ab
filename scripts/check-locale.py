#!/usr/bin/env python3
"""Lists the calls in libcaliper's sources that read or write a number
through the process's locale: strtod/strtof/atof/sscanf("%f"), and
snprintf/sprintf/printf whose literal format can print a decimal point (%f
with decimals, %g, %e, %a), and every v*printf (its format is the caller's). The library's own are cal_strtod,
cal_snprintf, cal_vsnprintf and cal_buf_printf (lib/util/c_locale.h), which
run under the C locale. Usage: check-locale.py FILE...; exit 1 when any."""
import re
import sys

CONV = re.compile(r"%[-+ #0']*(\d+|\*)?(\.(\*|\d+))?(hh|h|ll|l|L|z|j|t)?([diouxXcspnfFgGeEaA%])")
CALL = re.compile(r"(?<![A-Za-z0-9_])(strtod|strtof|strtold|atof|sscanf|v?s?n?printf|fprintf|dprintf)\s*\(")


def fraction_format(fmt):
    for m in CONV.finditer(fmt):
        c, prec = m.group(5), m.group(3)
        if c in "fF" and prec == "0":
            continue
        if c in "fFgGeEaA":
            return True
    return False


def calls(src):
    for m in CALL.finditer(src):
        i, depth = m.end(), 1
        while depth and i < len(src):
            ch = src[i]
            if ch == '"':
                i += 1
                while i < len(src) and src[i] != '"':
                    i += 2 if src[i] == "\\" else 1
            elif ch == "'":
                i += 1
                while i < len(src) and src[i] != "'":
                    i += 2 if src[i] == "\\" else 1
            elif ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
            i += 1
        yield m.group(1), m.start(), src[m.start():i]


def main(paths):
    bad = 0
    for p in paths:
        src = open(p, encoding="utf-8", errors="replace").read()
        src = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), src, flags=re.S)
        src = re.sub(r"//[^\n]*", "", src)
        for name, pos, call in calls(src):
            lits = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', call))
            if name in ("strtod", "strtof", "strtold", "atof", "vsnprintf", "vsprintf",
                        "vprintf", "vfprintf", "vdprintf") or \
               (name == "sscanf" and fraction_format(lits)) or \
               (name != "sscanf" and fraction_format(lits)):
                line = src.count("\n", 0, pos) + 1
                print("%s:%d: %s under the process locale: %s" % (p, line, name,
                      " ".join(call.split())[:100]))
                bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
