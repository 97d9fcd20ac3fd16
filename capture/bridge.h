/* deskbox-bridge internals (capture/bridge*.c, linked only into the bridge). */
#ifndef DESKBOX_CAPTURE_BRIDGE_H
#define DESKBOX_CAPTURE_BRIDGE_H

/* Drops to nobody/nogroup (65534, no supplementary groups) when any of its
 * ids is root, makes the process non-dumpable, sets no_new_privs and
 * installs the seccomp allowlist for the handshake and the main loop.  Call
 * before the first read from the VNC socket.  Returns 0 or -1. */
int bridge_sandbox(void);

#endif
