/* vm_exec: deskbox-init's host-side mode for a program in a VM sandbox
 * (`deskbox-init vm-exec RUN_DIR REQUEST`, see vm_exec.c). */
#ifndef DESKBOX_DESKTOP_IMAGE_VM_EXEC_H
#define DESKBOX_DESKTOP_IMAGE_VM_EXEC_H

/* Runs the client; returns the exit code (the program's). */
int vm_exec_main(int argc, char **argv);

#endif
