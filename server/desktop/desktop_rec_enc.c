/* A recording's encoder (internal.h, "rec_enc"): B,G,R,X frames from the
 * mirror to H.264 in fragmented MP4 or VP8 in WebM with Debian's libav*.
 *
 * Frames come only when the screen changed, each stamped with its time
 * (milliseconds since the start): an idle screen encodes nothing.  Both
 * containers are written so that a file cut short (deskboxd killed) still
 * decodes up to its last fragment or cluster: MP4 with an empty moov and
 * fragments, WebM in clusters, each ended by rec_enc_flush (the recorder
 * does every second while frames come). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>

#include "desktop.h"
#include "internal.h"

struct rec_enc {
	AVFormatContext *oc;
	AVCodecContext *cc;
	AVStream *st;
	AVFrame *frame;
	AVPacket *pkt;
	struct SwsContext *sws;
	uint32_t w, h;	    /* the screen's */
	int64_t last_pts;   /* of the last frame sent, -1 before the first */
	int header_written; /* the trailer is due */
};

static int av_fail(struct err *e, int rc, const char *what)
{
	char msg[128];
	av_strerror(rc, msg, sizeof(msg));
	return err_set(e, rc == AVERROR(ENOSPC) ? ERR_NO_SPACE : ERR_INTERNAL,
		       rc < 0 && rc > -4096 ? -rc : EIO, "%s: %s", what, msg);
}

/* The codec's settings: fast, no B-frames (each frame out at once), a
 * keyframe every 2 s worth of frames. */
static void tune(AVCodecContext *cc, int webm, int fps)
{
	cc->time_base = (AVRational){1, 1000};
	cc->framerate = (AVRational){fps, 1};
	cc->gop_size = fps * 2;
	cc->max_b_frames = 0;
	cc->pix_fmt = AV_PIX_FMT_YUV420P;
	if (webm) {
		/* Realtime VP8 at the fastest speed; constant quality. */
		av_opt_set(cc->priv_data, "deadline", "realtime", 0);
		av_opt_set_int(cc->priv_data, "cpu-used", 8, 0);
		av_opt_set_int(cc->priv_data, "lag-in-frames", 0, 0);
		av_opt_set_int(cc->priv_data, "crf", 12, 0);
		cc->bit_rate = 2000000;
		cc->qmin = 4;
		cc->qmax = 40;
	} else {
		av_opt_set(cc->priv_data, "preset", "ultrafast", 0);
		av_opt_set(cc->priv_data, "tune", "zerolatency", 0);
		av_opt_set(cc->priv_data, "crf", "26", 0);
	}
	cc->thread_count = 1;
}

static int open_codec(struct rec_enc *x, int webm, int fps, struct err *e)
{
	const AVCodec *codec = avcodec_find_encoder_by_name(webm ? "libvpx" : "libx264");
	if (!codec)
		return err_set(e, ERR_UNAVAILABLE, ENOSYS, "no %s encoder in this libavcodec",
			       webm ? "VP8 (libvpx)" : "H.264 (libx264)");
	x->cc = avcodec_alloc_context3(codec);
	x->st = avformat_new_stream(x->oc, NULL);
	if (!x->cc || !x->st)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	/* 4:2:0 wants even sizes: the last odd row or column is left out. */
	x->cc->width = (int)(x->w & ~1u);
	x->cc->height = (int)(x->h & ~1u);
	tune(x->cc, webm, fps);
	if (x->oc->oformat->flags & AVFMT_GLOBALHEADER)
		x->cc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
	int rc = avcodec_open2(x->cc, codec, NULL);
	if (rc < 0)
		return av_fail(e, rc, "opening the encoder");
	rc = avcodec_parameters_from_context(x->st->codecpar, x->cc);
	if (rc < 0)
		return av_fail(e, rc, "setting the stream up");
	x->st->time_base = x->cc->time_base;
	x->frame = av_frame_alloc();
	x->pkt = av_packet_alloc();
	if (!x->frame || !x->pkt)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	x->frame->format = x->cc->pix_fmt;
	x->frame->width = x->cc->width;
	x->frame->height = x->cc->height;
	rc = av_frame_get_buffer(x->frame, 0);
	if (rc < 0)
		return av_fail(e, rc, "allocating a frame");
	x->sws = sws_getContext(x->cc->width, x->cc->height, AV_PIX_FMT_BGR0, x->cc->width,
				x->cc->height, AV_PIX_FMT_YUV420P, SWS_POINT, NULL, NULL, NULL);
	if (!x->sws)
		return err_set(e, ERR_INTERNAL, ENOMEM, "no colour converter");
	return 0;
}

int rec_enc_open(struct rec_enc **out, const char *path, int webm, uint32_t w, uint32_t h, int fps,
		 struct err *e)
{
	struct rec_enc *x = calloc(1, sizeof(*x));
	if (!x)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	x->w = w;
	x->h = h;
	x->last_pts = -1;
	int rc = avformat_alloc_output_context2(&x->oc, NULL, webm ? "webm" : "mp4", path);
	int r = rc < 0 ? av_fail(e, rc, "making the container") : open_codec(x, webm, fps, e);
	if (r == 0 && (rc = avio_open(&x->oc->pb, path, AVIO_FLAG_WRITE)) < 0)
		r = av_fail(e, rc, "creating the file");
	AVDictionary *opts = NULL;
	if (webm)
		av_dict_set(&opts, "cluster_time_limit", "1000", 0);
	else
		av_dict_set(&opts, "movflags", "frag_keyframe+empty_moov+default_base_moof", 0);
	if (r == 0 && (rc = avformat_write_header(x->oc, &opts)) < 0)
		r = av_fail(e, rc, "writing the header");
	av_dict_free(&opts);
	if (r < 0) {
		rec_enc_free(x);
		return r;
	}
	x->header_written = 1;
	avio_flush(x->oc->pb);
	*out = x;
	return 0;
}

/* Sends `f` (NULL: flush) and writes what comes out. */
static int drain(struct rec_enc *x, AVFrame *f, struct err *e)
{
	int rc = avcodec_send_frame(x->cc, f);
	if (rc < 0 && rc != AVERROR_EOF)
		return av_fail(e, rc, "encoding");
	for (;;) {
		rc = avcodec_receive_packet(x->cc, x->pkt);
		if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF)
			return 0;
		if (rc < 0)
			return av_fail(e, rc, "encoding");
		av_packet_rescale_ts(x->pkt, x->cc->time_base, x->st->time_base);
		x->pkt->stream_index = x->st->index;
		rc = av_interleaved_write_frame(x->oc, x->pkt);
		if (rc < 0)
			return av_fail(e, rc, "writing");
	}
}

int rec_enc_frame(struct rec_enc *x, const uint8_t *bgrx, size_t stride, int64_t pts_ms,
		  struct err *e)
{
	/* One frame per millisecond at most: a later one replaces nothing,
	 * it waits for the next tick. */
	if (pts_ms <= x->last_pts)
		return 0;
	int rc = av_frame_make_writable(x->frame);
	if (rc < 0)
		return av_fail(e, rc, "allocating a frame");
	const uint8_t *src[1] = {bgrx};
	int sstride[1] = {(int)stride};
	sws_scale(x->sws, src, sstride, 0, x->cc->height, x->frame->data, x->frame->linesize);
	x->frame->pts = pts_ms;
	x->last_pts = pts_ms;
	int r = drain(x, x->frame, e);
	if (r == 0)
		avio_flush(x->oc->pb);
	return r;
}

int rec_enc_flush(struct rec_enc *x, struct err *e)
{
	/* A NULL packet ends the MP4 fragment or the WebM cluster being
	 * built: what was encoded is then on disk, complete. */
	int rc = av_write_frame(x->oc, NULL);
	if (rc < 0)
		return av_fail(e, rc, "flushing");
	avio_flush(x->oc->pb);
	return 0;
}

int64_t rec_enc_last_pts(const struct rec_enc *x)
{
	return x->last_pts;
}

int rec_enc_close(struct rec_enc *x, struct err *e)
{
	int r = drain(x, NULL, e);
	int rc = av_write_trailer(x->oc);
	x->header_written = 0;
	if (r == 0 && rc < 0)
		r = av_fail(e, rc, "writing the trailer");
	rec_enc_free(x);
	return r;
}

void rec_enc_free(struct rec_enc *x)
{
	if (!x)
		return;
	sws_freeContext(x->sws);
	av_frame_free(&x->frame);
	av_packet_free(&x->pkt);
	avcodec_free_context(&x->cc);
	if (x->oc && x->oc->pb)
		avio_closep(&x->oc->pb);
	avformat_free_context(x->oc);
	free(x);
}
