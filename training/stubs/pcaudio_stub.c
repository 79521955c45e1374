/* Stand-in for libpcaudio.so.0 on the GPU machine, where no audio output exists.
 * espeak-ng links libpcaudio for playback only; writing WAV files (-w) never calls it.
 * Every call reports failure, so accidental playback fails loudly instead of hanging. */
#include <stddef.h>
struct audio_object;
struct audio_object *create_audio_device_object(const char *d, const char *a, const char *n) { (void)d; (void)a; (void)n; return NULL; }
int audio_object_open(struct audio_object *o, int f, unsigned r, unsigned char c) { (void)o; (void)f; (void)r; (void)c; return -1; }
void audio_object_close(struct audio_object *o) { (void)o; }
void audio_object_destroy(struct audio_object *o) { (void)o; }
int audio_object_write(struct audio_object *o, const void *d, size_t b) { (void)o; (void)d; (void)b; return -1; }
int audio_object_drain(struct audio_object *o) { (void)o; return -1; }
int audio_object_flush(struct audio_object *o) { (void)o; return -1; }
const char *audio_object_strerror(struct audio_object *o, int e) { (void)o; (void)e; return "no audio output on this machine"; }
