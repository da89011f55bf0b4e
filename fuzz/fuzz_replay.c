/* Replays saved inputs through a fuzz target's entry point in a plain build (no libFuzzer):
 * every file named on the command line, or every file in a directory named there. Used by
 * CTest for fuzz/regressions/<target>/ (inputs that once crashed) and the seed corpora.
 * Exit 0 when every input ran; 1 when one failed or the target's setup cannot run here (its model
 * is missing: scripts/setup.sh installs it). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));
#ifdef WGML_REPLAY_SETUP
int WGML_REPLAY_SETUP(void);
#endif

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    if (!buf || (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n)) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        fclose(f);
        free(buf);
        return 1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, (size_t)n);
    free(buf);
    return 0;
}

int main(int argc, char **argv) {
#ifdef WGML_REPLAY_SETUP
    if (!WGML_REPLAY_SETUP()) {
        printf("replay: the target's setup failed (is the model missing? scripts/setup.sh installs it)\n");
        return 1;
    }
#endif
    int files = 0, bad = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) continue; /* an absent folder: nothing to replay */
        if (S_ISDIR(st.st_mode)) {
            DIR *d = opendir(argv[i]);
            struct dirent *e;
            while (d && (e = readdir(d))) {
                if (e->d_name[0] == '.') continue;
                char p[4096];
                snprintf(p, sizeof p, "%s/%s", argv[i], e->d_name);
                bad += run_file(p);
                files++;
            }
            if (d) closedir(d);
        } else {
            bad += run_file(argv[i]);
            files++;
        }
    }
    printf("replay: %d inputs ran without a crash (%d unreadable)\n", files - bad, bad);
    return bad ? 1 : 0;
}
