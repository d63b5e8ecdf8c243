/*
 * nova-rdt-stress: the noisy neighbour's load, run as the guest's
 * "noisy" role.  It walks a buffer larger than the host's L3 in a
 * scattered order, reading and writing one word per cache line, so the
 * vCPU both burns CPU time and evicts its neighbours' lines: what the
 * seed's VM1 does with memtester, which busybox lacks.
 *
 *   nova-rdt-stress [MiB]    (default 64)
 *
 * Built static (gcc -static) by tools/build-guest-image.sh: the
 * initramfs has no C library.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define LINE 64

int main(int argc, char **argv)
{
    long mib = argc > 1 ? strtol(argv[1], NULL, 10) : 64;
    if (mib < 1 || mib > 4096) {
        fprintf(stderr, "nova-rdt-stress: size must be 1..4096 MiB, got %s\n",
                argv[1]);
        return 2;
    }
    size_t lines = (size_t)mib * 1024 * 1024 / LINE;
    volatile uint64_t *buf = malloc(lines * LINE);
    if (!buf) {
        fprintf(stderr, "nova-rdt-stress: cannot allocate %ld MiB\n", mib);
        return 1;
    }
    /* A stride coprime with the line count visits every line in an order
     * the hardware prefetcher does not follow. */
    size_t stride = 7919;
    while (lines % stride == 0)
        stride += 2;
    const size_t words = LINE / sizeof(uint64_t);
    size_t i = 0;
    for (uint64_t pass = 0;; pass++) {
        for (size_t n = 0; n < lines; n++) {
            buf[i * words] += pass;
            i = (i + stride) % lines;
        }
    }
}
