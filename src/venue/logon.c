/* The logon handshake (docs/venue.md, "Logon"): before any OFL1 frame, the server sends a
 * challenge with a fresh 32-byte nonce, the client answers with its session name and
 * HMAC-SHA256(secret, LABEL || nonce || name), the server answers accepted or refused. The
 * secret never crosses the wire. Handshake frames: u16 LE length of what follows (at most
 * TFV_LOGON_MAX - 2), u8 type, body.
 */
#include <endian.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "venue/venue.h"

#define MAGIC "TFV1"
#define VERSION 1

int tfv_logon_mac(const uint8_t *secret, size_t secret_len, const uint8_t nonce[TFV_LOGON_NONCE],
                  const char *name, size_t name_len, uint8_t mac[TFV_LOGON_MAC])
{
    uint8_t msg[sizeof TFV_LOGON_LABEL + TFV_LOGON_NONCE + TFV_NAME_MAX];
    size_t ll = sizeof TFV_LOGON_LABEL - 1;
    if (!secret || !secret_len || secret_len > TFV_SECRET_MAX || name_len > TFV_NAME_MAX)
        return TF_E_INVALID_ARG;
    memcpy(msg, TFV_LOGON_LABEL, ll);
    memcpy(msg + ll, nonce, TFV_LOGON_NONCE);
    memcpy(msg + ll + TFV_LOGON_NONCE, name, name_len);
    unsigned int n = TFV_LOGON_MAC;
    if (!HMAC(EVP_sha256(), secret, (int)secret_len, msg, ll + TFV_LOGON_NONCE + name_len, mac,
              &n) ||
        n != TFV_LOGON_MAC)
        return TF_E_INVALID_ARG;
    return 0;
}

static int put_head(uint8_t *buf, size_t cap, size_t body, uint8_t type)
{
    size_t total = 3 + body;
    if (total > TFV_LOGON_MAX)
        return TF_E_INVALID_ARG;
    if (cap < total)
        return TF_E_OFL_BUFFER_TOO_SHORT;
    uint16_t l = htole16((uint16_t)(1 + body));
    memcpy(buf, &l, 2);
    buf[2] = type;
    return (int)total;
}

int tfv_logon_challenge(uint8_t *buf, size_t cap, uint8_t nonce_out[TFV_LOGON_NONCE])
{
    int n = put_head(buf, cap, 5 + TFV_LOGON_NONCE, TFV_LOGON_CHALLENGE);
    if (n < 0)
        return n;
    if (RAND_bytes(nonce_out, TFV_LOGON_NONCE) != 1)
        return TF_E_INVALID_ARG;
    memcpy(buf + 3, MAGIC, 4);
    buf[7] = VERSION;
    memcpy(buf + 8, nonce_out, TFV_LOGON_NONCE);
    return n;
}

int tfv_logon_answer(uint8_t *buf, size_t cap, const char *name, const uint8_t *secret,
                     size_t secret_len, const uint8_t nonce[TFV_LOGON_NONCE])
{
    size_t nl = strlen(name);
    if (nl < 1 || nl > TFV_NAME_MAX)
        return TF_E_INVALID_ARG;
    int n = put_head(buf, cap, 1 + nl + TFV_LOGON_MAC, TFV_LOGON_ANSWER);
    if (n < 0)
        return n;
    buf[3] = (uint8_t)nl;
    memcpy(buf + 4, name, nl);
    int rc = tfv_logon_mac(secret, secret_len, nonce, name, nl, buf + 4 + nl);
    return rc ? rc : n;
}

int tfv_logon_result(uint8_t *buf, size_t cap, int accepted, uint64_t session_id,
                     uint64_t last_client_seq)
{
    int n = put_head(buf, cap, 17, TFV_LOGON_RESULT);
    if (n < 0)
        return n;
    buf[3] = accepted ? 0 : 1;
    uint64_t a = htole64(accepted ? session_id : 0), b = htole64(accepted ? last_client_seq : 0);
    memcpy(buf + 4, &a, 8);
    memcpy(buf + 12, &b, 8);
    return n;
}

int tfv_logon_frame_size(const uint8_t *buf, size_t len)
{
    if (len < 2)
        return 0;
    size_t l = (size_t)buf[0] | (size_t)buf[1] << 8;
    if (l < 1 || 2 + l > TFV_LOGON_MAX)
        return TF_E_PROTOCOL;
    return len < 2 + l ? 0 : (int)(2 + l);
}

int tfv_logon_parse_answer(const uint8_t *f, size_t n, char *name, size_t *name_len,
                           uint8_t mac[TFV_LOGON_MAC])
{
    if (n < 4 || f[2] != TFV_LOGON_ANSWER)
        return TF_E_PROTOCOL;
    size_t nl = f[3];
    if (nl < 1 || nl > TFV_NAME_MAX || n != 4 + nl + TFV_LOGON_MAC)
        return TF_E_PROTOCOL;
    memcpy(name, f + 4, nl);
    name[nl] = 0;
    *name_len = nl;
    memcpy(mac, f + 4 + nl, TFV_LOGON_MAC);
    return 0;
}

const tfv_session *tfv_logon_check(const tfv_sessions *s, const uint8_t nonce[TFV_LOGON_NONCE],
                                   const char *name, size_t name_len,
                                   const uint8_t mac[TFV_LOGON_MAC])
{
    static const uint8_t dummy_secret[TFV_SECRET_MIN] = {0};
    const tfv_session *sess = tfv_sessions_find(s, name, name_len);
    uint8_t want[TFV_LOGON_MAC];
    /* An unknown name costs the same MAC as a known one: the answer's timing tells nothing. */
    int rc = sess ? tfv_logon_mac(sess->secret, sess->secret_len, nonce, name, name_len, want)
                  : tfv_logon_mac(dummy_secret, sizeof dummy_secret, nonce, name, name_len, want);
    int same = CRYPTO_memcmp(want, mac, TFV_LOGON_MAC) == 0;
    return !rc && sess && same ? sess : NULL;
}
