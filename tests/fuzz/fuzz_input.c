/* Fuzzes key names, key combinations and text typing: whatever the input,
 * the builders return an error or well-formed events, never crash. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "input/input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	struct err e = ERR_INIT;
	struct input_seq seq = {0};
	input_seq_keys(&seq, s, &e);
	int downs = 0;
	for (size_t i = 0; i < seq.n; i++)
		downs += seq.ev[i].down ? 1 : -1;
	if (seq.n && downs != 0)
		abort(); /* every press has its release */
	input_seq_release(&seq);
	uint32_t ks;
	input_keysym_parse(s, &ks, &e);
	if (input_seq_text(&seq, (const char *)data, size, &e) == 0 &&
	    !utf8_valid((const char *)data, size))
		abort(); /* typing accepted invalid UTF-8 */
	input_seq_release(&seq);
	char *clean = utf8_sanitize((const char *)data, size);
	if (clean && !utf8_valid(clean, strlen(clean)))
		abort();
	free(clean);
	free(base64_encode(data, size));
	free(s);
	return 0;
}
