/* caliper — units in and out through one table, so what a flag accepts and
 * what a table prints agree ("250ms", "2.7GB", "1133GB/s", "60W", "2k").
 * Every quantity is held in its SI base unit as a double:
 *   time s, bytes B, bandwidth B/s, count 1, power W, energy J, frequency Hz,
 *   throughput tokens/s (tok/s), ratio 1 (a bare number, "x" or "%" allowed).
 * Decimal prefixes are powers of 1000 (KB = 1e3 B, as the notes write them);
 * binary prefixes (KiB, MiB, GiB) are powers of 1024. */
#ifndef CALIPER_UNITS_H
#define CALIPER_UNITS_H
#include <stddef.h>

typedef enum cal_unit {
    CAL_U_TIME,       /* s:  ns us ms s m(in) h d */
    CAL_U_BYTES,      /* B:  B KB MB GB TB KiB MiB GiB TiB */
    CAL_U_BANDWIDTH,  /* B/s: any byte unit followed by /s */
    CAL_U_COUNT,      /* 1:  k M G (and Ki Mi Gi) */
    CAL_U_POWER,      /* W:  mW W kW */
    CAL_U_ENERGY,     /* J:  mJ J kJ MJ Wh kWh */
    CAL_U_FREQ,       /* Hz: Hz kHz MHz GHz */
    CAL_U_TOKRATE,    /* tok/s: tok/s, ktok/s; a bare number is tok/s */
    CAL_U_RATIO       /* 1:  bare number, "1.42x", "5.5%" (= 0.055) */
} cal_unit;

/* Parse s as a quantity of kind u into *out (base unit).
 * bare_unit: the unit a bare number means ("ms", "GB"...), or NULL to require
 * a unit (a bare "0" is always accepted). Returns CAL_OK, or CAL_EINVAL for
 * an empty string, a non-number, an unknown unit, or a non-finite value. */
int cal_unit_parse(cal_unit u, const char *s, const char *bare_unit, double *out);

/* Format v (base unit) with the largest unit that keeps the mantissa >= 1,
 * with `sig` significant digits (3 if 0): "250 ms", "2.70 GB", "1.13 TB/s".
 * Writes at most n bytes including the NUL; returns buf. */
char *cal_unit_format(cal_unit u, double v, int sig, char *buf, size_t n);

/* The name of a unit kind ("time", "bytes", ...), for error messages. */
const char *cal_unit_name(cal_unit u);

#endif
