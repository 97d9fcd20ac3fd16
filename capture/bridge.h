/* deskbox-bridge internals (capture/bridge*.c, linked only into the bridge). */
#ifndef DESKBOX_CAPTURE_BRIDGE_H
#define DESKBOX_CAPTURE_BRIDGE_H

/* Drops to nobody (65534) when running as root, sets no_new_privs and
 * installs the seccomp allowlist for the bridge's main loop.  Call after the
 * RFB handshake, before handling any framebuffer data.  Returns 0 or -1. */
int bridge_sandbox(void);

#endif
