/* int80: issues getpid through the 32-bit system call table (int $0x80)
 * and prints what came back: "int80: pid N" if the call ran, "int80: error
 * N" if it was refused with an errno.  Under the sandbox's seccomp profile,
 * which allows the native table only, it must be killed (SIGSYS) or refused,
 * never get a pid.  x86_64 only; static, without libc (the sandbox has no
 * 32-bit libraries, and none are needed to enter the 32-bit table). */
#if !defined(__x86_64__)
#error "int80 is an x86_64 test program"
#endif

#define NR32_GETPID 20
#define NR64_WRITE  1
#define NR64_EXIT   60

static long sys3(long nr, long a, long b, long c)
{
	long r;
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "a"(nr), "D"(a), "S"(b), "d"(c)
			 : "rcx", "r11", "memory");
	return r;
}

static int int80_getpid(void)
{
	int r;
	__asm__ volatile("int $0x80" : "=a"(r) : "a"(NR32_GETPID) : "memory");
	return r;
}

static char *utoa(char *end, unsigned long v)
{
	do
		*--end = (char)('0' + v % 10);
	while (v /= 10);
	return end;
}

void _start(void);

/* The kernel enters with the stack 16-byte aligned, not as after a call. */
__attribute__((force_align_arg_pointer, noreturn)) void _start(void)
{
	char buf[64];
	char *end = buf + sizeof(buf);
	*--end = '\n';
	int r = int80_getpid();
	char *p = utoa(end, (unsigned long)(r < 0 ? -(long)r : r));
	const char *word = r < 0 ? "int80: error " : "int80: pid ";
	int wl = 0;
	while (word[wl])
		wl++;
	p -= wl;
	for (int i = 0; i < wl; i++)
		p[i] = word[i];
	sys3(NR64_WRITE, 1, (long)p, (long)(buf + sizeof(buf) - p));
	sys3(NR64_EXIT, 0, 0, 0);
	for (;;)
		;
}
