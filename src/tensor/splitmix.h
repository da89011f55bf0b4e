/* splitmix64: the host-side generator of the seeded initialisations and shuffles (LoRA's A,
 * the trainer's adapters, the data order). One step advances the state *s by the golden-ratio
 * increment and returns its mixed value; the same seed gives the same sequence everywhere,
 * which checkpoints and resumed runs rely on. */
#ifndef WGML_SPLITMIX_H
#define WGML_SPLITMIX_H

#include <stdint.h>

static inline uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

#endif
