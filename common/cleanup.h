/* Scope-bound ownership helpers (GCC/Clang cleanup attribute).
 *
 *   _cleanup_fd_ int fd = open(...);     closed when it goes out of scope
 *   _cleanup_free_ char *s = strdup(...); freed when it goes out of scope
 *
 * Hand ownership off with TAKE_FD(fd) / TAKE_PTR(p), which return the value
 * and leave -1 / NULL behind so the cleanup does nothing. */
#ifndef DESKBOX_COMMON_CLEANUP_H
#define DESKBOX_COMMON_CLEANUP_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void cleanup_fd(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}

static inline void cleanup_free(void *p)
{
	free(*(void **)p);
}

static inline void cleanup_file(FILE **f)
{
	if (*f)
		fclose(*f);
}

#define _cleanup_fd_   __attribute__((cleanup(cleanup_fd)))
#define _cleanup_free_ __attribute__((cleanup(cleanup_free)))
#define _cleanup_file_ __attribute__((cleanup(cleanup_file)))

#define TAKE_FD(fd)                                                                                \
	({                                                                                         \
		int take_fd_ = (fd);                                                               \
		(fd) = -1;                                                                         \
		take_fd_;                                                                          \
	})

#define TAKE_PTR(p)                                                                                \
	({                                                                                         \
		__typeof__(p) take_ptr_ = (p);                                                     \
		(p) = NULL;                                                                        \
		take_ptr_;                                                                         \
	})

#endif
