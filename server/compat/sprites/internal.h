/* Sprites' front-end (docs/compat.md): sprites, checkpoints and the
 * routes (sprites_api.c), exec over a WebSocket (sprites_exec.c).  Shared
 * by those files only. */
#ifndef DESKBOX_SERVER_COMPAT_SPRITES_INTERNAL_H
#define DESKBOX_SERVER_COMPAT_SPRITES_INTERNAL_H

#include "server/compat/internal.h"

/* GET /sprites/v1/sprites/{name}/exec (a WebSocket upgrade). */
int sp_exec(struct http_request *req, struct http_response *res, struct err *e);

#endif
