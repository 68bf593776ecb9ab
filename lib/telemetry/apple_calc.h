/* The Apple Silicon backend's arithmetic (apple_calc.c), built on every
 * platform and tested on captured readings (tests/unit/test_apple.c); the
 * calls that fetch the readings are apple.c's, on macOS only. Private to
 * lib/telemetry. */
#ifndef CALIPER_APPLE_CALC_H
#define CALIPER_APPLE_CALC_H
#include <stddef.h>
#include <stdint.h>

/* IOReport's energy unit label ("mJ", "uJ", "nJ") in joules; 0 unknown. */
double tel_apple_unit_to_j(const char *unit);

/* One interval's energy, summed over the "Energy Model" group's channels:
 * every "... CPU Energy" (ECPU, PCPU clusters), "GPU Energy", "DRAM...",
 * "ANE...". Other groups are ignored. Watts are joules / interval. */
typedef struct tel_apple_energy {
    double cpu_j, gpu_j, dram_j, ane_j;
    int have_cpu, have_gpu, have_dram, have_ane;
} tel_apple_energy;
void tel_apple_energy_add(tel_apple_energy *acc, const char *group, const char *name,
                          const char *unit, int64_t value);

/* The GPU's DVFS table from pmgr's "voltage-states9" property: 8-byte
 * records, a little-endian u32 frequency in Hz first; the 0 Hz OFF entry
 * is skipped. Returns the number of frequencies written (at most cap). */
int tel_apple_dvfs_table(const unsigned char *p, size_t len, double *hz, int cap);

/* "GPU Stats"/"GPUPH" residency: states named OFF, IDLE or DOWN are idle;
 * the others are the DVFS table's entries in order. Gives the active share
 * (%) and the residency-weighted clock (MHz, NaN when never active).
 * Returns -1 when no active state maps to a frequency. */
int tel_apple_gpu_residency(const char *const *names, const int64_t *res, int n,
                            const double *hz, int nhz, double *active_pct, double *mhz);

/* `pmset -g therm`: the CPU speed limit (%), scheduler limit (%), available
 * CPUs, and the thermal warning level (0 when none was recorded). Fields it
 * does not print are NaN. Returns -1 when the text has none of them. */
typedef struct tel_apple_therm {
    double cpu_speed_limit, scheduler_limit, available_cpus;
    int warning_level;
} tel_apple_therm;
int tel_apple_parse_pmset_therm(const char *text, tel_apple_therm *t);

/* AppleSMC: a four-character key as the u32 the SMC user client takes
 * ("PSTR" → 0x50535452; 0 when not four characters), and a value of type
 * "flt " (little-endian float), "sp78" (8.8 fixed point), "ui8 ", "ui16",
 * "ui32" (big-endian). Returns -1 for another type or too few bytes. */
uint32_t tel_apple_smc_key(const char *four);
int tel_apple_smc_decode(const char *type, const unsigned char *b, size_t n, double *out);

#endif
