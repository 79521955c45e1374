/* Stand-in for libpulse-simple.so.0 on the GPU machine, where no audio output exists.
 * Festival's libestbase links libpulse-simple for playback only; text2wave and utt.save.wave never call it,
 * and the real library would pull in libpulse, X11, dbus, systemd and libsndfile's codecs.
 * Every call reports failure, so accidental playback fails loudly instead of hanging.
 * Build: gcc -shared -fPIC -Wl,--version-script=training/stubs/pulse_simple_stub.map
 *          -Wl,-soname,libpulse-simple.so.0 -o libpulse-simple.so.0 training/stubs/pulse_simple_stub.c */
#include <stddef.h>
typedef struct pa_simple pa_simple;
pa_simple *pa_simple_new(const char *server, const char *name, int dir, const char *dev, const char *stream,
                         const void *spec, const void *map, const void *attr, int *error) {
    (void)server; (void)name; (void)dir; (void)dev; (void)stream; (void)spec; (void)map; (void)attr;
    if (error) *error = 1;
    return NULL;
}
int pa_simple_write(pa_simple *s, const void *data, size_t bytes, int *error) {
    (void)s; (void)data; (void)bytes;
    if (error) *error = 1;
    return -1;
}
int pa_simple_drain(pa_simple *s, int *error) { (void)s; if (error) *error = 1; return -1; }
void pa_simple_free(pa_simple *s) { (void)s; }
