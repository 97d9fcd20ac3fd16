/* secrets_ca: a sandbox's egress CA (GnuTLS), and the leaf certificates it
 * signs for the hosts whose TLS is terminated.
 *
 * The CA is ECDSA P-256 (generated in ~1 ms, where RSA-2048 takes tens),
 * valid ten years; ca.key never leaves the host's state dir.  Leaf
 * certificates share one key per loaded CA, are valid for 30 days from an
 * hour ago (clock skew inside the sandbox) and are cached by host name. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/cleanup.h"
#include "common/fs.h"

#define CA_CACHE   64
#define CA_DAYS	   (10 * 365)
#define LEAF_DAYS  30
#define PEM_MAX	   (64 * 1024)
#define CURVE_BITS GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1)

struct leaf {
	char host[SECRETS_HOST_MAX + 1];
	gnutls_certificate_credentials_t creds;
	unsigned long long used;
};

struct egress_ca {
	pthread_mutex_t mu;
	gnutls_x509_crt_t crt;
	gnutls_x509_privkey_t key, leaf_key;
	struct leaf cache[CA_CACHE];
	unsigned long long clock;
};

static int tls_err(struct err *e, int rc, const char *what)
{
	return err_set(e, ERR_INTERNAL, EIO, "%s: %s", what, gnutls_strerror(rc));
}

static int set_serial(gnutls_x509_crt_t crt, struct err *e)
{
	unsigned char serial[16];
	if (fs_random(serial, sizeof(serial), e) < 0)
		return err_code(e);
	serial[0] &= 0x7f; /* a positive number */
	int rc = gnutls_x509_crt_set_serial(crt, serial, sizeof(serial));
	return rc < 0 ? tls_err(e, rc, "certificate serial") : 0;
}

static int new_key(gnutls_x509_privkey_t *key, struct err *e)
{
	int rc = gnutls_x509_privkey_init(key);
	if (rc == 0 &&
	    (rc = gnutls_x509_privkey_generate(*key, GNUTLS_PK_ECDSA, CURVE_BITS, 0)) < 0)
		gnutls_x509_privkey_deinit(*key);
	return rc < 0 ? tls_err(e, rc, "generating a key") : 0;
}

/* The common part of both kinds of certificate. */
static int crt_base(gnutls_x509_crt_t crt, gnutls_x509_privkey_t key, const char *cn, int days,
		    struct err *e)
{
	time_t now = time(NULL);
	int rc;
	if ((rc = gnutls_x509_crt_set_version(crt, 3)) < 0 ||
	    (rc = gnutls_x509_crt_set_activation_time(crt, now - 3600)) < 0 ||
	    (rc = gnutls_x509_crt_set_expiration_time(crt, now + (time_t)days * 86400)) < 0 ||
	    (rc = gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, cn,
						(unsigned)strlen(cn))) < 0 ||
	    (rc = gnutls_x509_crt_set_key(crt, key)) < 0)
		return tls_err(e, rc, "building a certificate");
	return set_serial(crt, e);
}

static int write_pem(const char *path, gnutls_datum_t *d, mode_t mode, struct err *e)
{
	int r = fs_write_atomic(path, d->data, d->size, mode, e);
	explicit_bzero(d->data, d->size);
	gnutls_free(d->data);
	return r;
}

static int make_ca(const char *dir, struct err *e)
{
	gnutls_x509_privkey_t key;
	gnutls_x509_crt_t crt;
	if (new_key(&key, e) < 0)
		return err_code(e);
	int rc = gnutls_x509_crt_init(&crt);
	if (rc < 0) {
		gnutls_x509_privkey_deinit(key);
		return tls_err(e, rc, "certificate");
	}
	char cn[64], hex[9];
	int r = fs_random_hex(hex, 4, e);
	snprintf(cn, sizeof(cn), "deskbox egress CA %s", r == 0 ? hex : "");
	if (r == 0)
		r = crt_base(crt, key, cn, CA_DAYS, e);
	if (r == 0 && ((rc = gnutls_x509_crt_set_basic_constraints(crt, 1, 0)) < 0 ||
		       (rc = gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_KEY_CERT_SIGN |
								    GNUTLS_KEY_CRL_SIGN)) < 0 ||
		       (rc = gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0)) < 0))
		r = tls_err(e, rc, "signing the CA");
	gnutls_datum_t kd = {0}, cd = {0};
	if (r == 0 && ((rc = gnutls_x509_privkey_export2(key, GNUTLS_X509_FMT_PEM, &kd)) < 0 ||
		       (rc = gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &cd)) < 0))
		r = tls_err(e, rc, "exporting the CA");
	char path[4096];
	if (r == 0) {
		snprintf(path, sizeof(path), "%s/ca.key", dir);
		r = write_pem(path, &kd, 0600, e);
		kd.data = NULL;
	}
	if (r == 0) {
		snprintf(path, sizeof(path), "%s/ca.pem", dir);
		r = write_pem(path, &cd, 0644, e);
		cd.data = NULL;
	}
	gnutls_free(kd.data);
	gnutls_free(cd.data);
	gnutls_x509_crt_deinit(crt);
	gnutls_x509_privkey_deinit(key);
	return r;
}

int secrets_ca_prepare(const char *dir, struct err *e)
{
	char path[4096];
	struct stat st;
	snprintf(path, sizeof(path), "%s/ca.pem", dir);
	if (stat(path, &st) == 0)
		return 0;
	if (fs_mkdir_p(dir, 0700, e) < 0 || make_ca(dir, e) < 0)
		return err_wrap(e, "making the sandbox's egress CA");
	return 0;
}

static int read_datum(const char *dir, const char *name, char **text, gnutls_datum_t *d,
		      struct err *e)
{
	char path[4096];
	size_t len;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (fs_read_file(path, PEM_MAX, text, &len, e) < 0)
		return err_code(e);
	d->data = (unsigned char *)*text;
	d->size = (unsigned)len;
	return 0;
}

int egress_ca_load(const char *dir, struct egress_ca **out, struct err *e)
{
	struct egress_ca *ca = calloc(1, sizeof(*ca));
	if (!ca)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	pthread_mutex_init(&ca->mu, NULL);
	_cleanup_free_ char *kt = NULL, *ct = NULL;
	gnutls_datum_t kd, cd;
	int rc = 0, r = read_datum(dir, "ca.key", &kt, &kd, e);
	if (r == 0)
		r = read_datum(dir, "ca.pem", &ct, &cd, e);
	if (r == 0 && ((rc = gnutls_x509_privkey_init(&ca->key)) < 0 ||
		       (rc = gnutls_x509_privkey_import(ca->key, &kd, GNUTLS_X509_FMT_PEM)) < 0 ||
		       (rc = gnutls_x509_crt_init(&ca->crt)) < 0 ||
		       (rc = gnutls_x509_crt_import(ca->crt, &cd, GNUTLS_X509_FMT_PEM)) < 0))
		r = tls_err(e, rc, "loading the egress CA");
	if (kt)
		explicit_bzero(kt, kd.size);
	if (r == 0)
		r = new_key(&ca->leaf_key, e);
	if (r < 0) {
		egress_ca_free(ca);
		return err_code(e);
	}
	*out = ca;
	return 0;
}

void egress_ca_free(struct egress_ca *ca)
{
	if (!ca)
		return;
	for (size_t i = 0; i < CA_CACHE; i++)
		if (ca->cache[i].creds)
			gnutls_certificate_free_credentials(ca->cache[i].creds);
	if (ca->crt)
		gnutls_x509_crt_deinit(ca->crt);
	if (ca->key)
		gnutls_x509_privkey_deinit(ca->key);
	if (ca->leaf_key)
		gnutls_x509_privkey_deinit(ca->leaf_key);
	pthread_mutex_destroy(&ca->mu);
	free(ca);
}

static int mint(struct egress_ca *ca, const char *host, gnutls_certificate_credentials_t *out,
		struct err *e)
{
	gnutls_x509_crt_t crt;
	int rc = gnutls_x509_crt_init(&crt);
	if (rc < 0)
		return tls_err(e, rc, "certificate");
	int r = crt_base(crt, ca->leaf_key, host, LEAF_DAYS, e);
	if (r == 0 &&
	    ((rc = gnutls_x509_crt_set_subject_alt_name(
		  crt, GNUTLS_SAN_DNSNAME, host, (unsigned)strlen(host), GNUTLS_FSAN_SET)) < 0 ||
	     (rc = gnutls_x509_crt_set_basic_constraints(crt, 0, -1)) < 0 ||
	     (rc = gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_DIGITAL_SIGNATURE)) < 0 ||
	     (rc = gnutls_x509_crt_set_key_purpose_oid(crt, GNUTLS_KP_TLS_WWW_SERVER, 0)) < 0 ||
	     (rc = gnutls_x509_crt_sign2(crt, ca->crt, ca->key, GNUTLS_DIG_SHA256, 0)) < 0 ||
	     (rc = gnutls_certificate_allocate_credentials(out)) < 0))
		r = tls_err(e, rc, "signing a certificate");
	if (r == 0 && (rc = gnutls_certificate_set_x509_key(*out, &crt, 1, ca->leaf_key)) < 0) {
		gnutls_certificate_free_credentials(*out);
		r = tls_err(e, rc, "certificate credentials");
	}
	gnutls_x509_crt_deinit(crt);
	return r;
}

int egress_ca_creds(struct egress_ca *ca, const char *host, gnutls_certificate_credentials_t *out,
		    struct err *e)
{
	pthread_mutex_lock(&ca->mu);
	struct leaf *victim = &ca->cache[0];
	int r = 0;
	for (size_t i = 0; i < CA_CACHE; i++) {
		struct leaf *l = &ca->cache[i];
		if (l->creds && strcmp(l->host, host) == 0) {
			l->used = ++ca->clock;
			*out = l->creds;
			pthread_mutex_unlock(&ca->mu);
			return 0;
		}
		if (l->used < victim->used)
			victim = l;
	}
	/* A full cache drops its least recently used entry, which no
	 * connection holds: credentials are used only under mu's
	 * protection... except during a handshake, so they are never
	 * freed while the CA lives; a full cache mints without caching. */
	gnutls_certificate_credentials_t c;
	r = mint(ca, host, &c, e);
	if (r == 0 && !victim->creds) {
		snprintf(victim->host, sizeof(victim->host), "%s", host);
		victim->creds = c;
		victim->used = ++ca->clock;
		*out = c;
	} else if (r == 0) {
		*out = c;
		r = 1; /* the caller's to free */
	}
	pthread_mutex_unlock(&ca->mu);
	return r;
}
