/* mgi devices (also --list-devices on any subcommand): the CUDA devices mgi can use, with
 * memory and peer access, and with several devices the matrix of links between them. No device
 * is a message on stderr and exit 0, not an error. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "engine/devices.h"

int cli_devices(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs("usage: mgi devices\n"
                  "  Lists the CUDA devices (CUDA_VISIBLE_DEVICES applies): index, name, compute\n"
                  "  capability, total and free MiB, and which other devices each can reach\n"
                  "  directly (peer access). With several devices, a matrix of the links: P<r> peer\n"
                  "  access with the runtime's performance rank r (0 fastest), 'a' when atomics cross\n"
                  "  the link (NVLink; PCIe peers usually lack them), '-' no peer access.\n", stdout);
            return 0;
        }
        if (strcmp(argv[i], "--list-devices")) {
            cli_error("devices: unknown flag '%s' (see mgi devices --help)", argv[i]);
            return EXIT_USAGE;
        }
    }
    char why[512] = "";
    int n = engine_device_count(why, sizeof why);
    if (n == 0) {
        fprintf(stderr, "mgi: no CUDA device (%s); mgi runs on the CPU\n", why);
        return 0;
    }
    printf("%-5s %-28s %-4s %10s %10s %4s  %-14s %s\n", "index", "name", "cc", "total MiB",
           "free MiB", "SMs", "pci", "peer access");
    for (int i = 0; i < n; i++) {
        engine_device_info d;
        char err[512];
        if (engine_device_query(i, &d, err, sizeof err)) {
            cli_error("%s", err);
            return EXIT_RUNTIME;
        }
        printf("%-5d %-28s %d.%d  %10llu %10llu %4d  %-14s", i, d.name, d.cc_major, d.cc_minor,
               (unsigned long long)(d.total_bytes >> 20), (unsigned long long)(d.free_bytes >> 20),
               d.n_sm, d.pci_bus_id);
        int any = 0;
        for (int j = 0; j < n; j++) {
            if (j == i || !engine_device_can_peer(i, j)) continue;
            printf("%s%d", any ? "," : " ", j);
            any = 1;
        }
        printf("%s\n", any ? "" : " none");
    }
    if (n > 1) {
        /* Rows reach columns; indented so that no line starts with a device index. */
        printf("\nlinks (P<rank>: peer access, 0 fastest; a: atomics, as NVLink has; -: none)\n  %-4s", "");
        for (int j = 0; j < n; j++) printf(" %5d", j);
        printf("\n");
        for (int i = 0; i < n; i++) {
            printf("  %-4d", i);
            for (int j = 0; j < n; j++) {
                engine_device_link l;
                char cell[16] = "-";
                if (i == j) snprintf(cell, sizeof cell, "self");
                else if (!engine_device_link_query(i, j, &l) && l.access)
                    snprintf(cell, sizeof cell, "P%d%s", l.rank, l.native_atomics ? "a" : "");
                printf(" %5s", cell);
            }
            printf("\n");
        }
    }
    return 0;
}
