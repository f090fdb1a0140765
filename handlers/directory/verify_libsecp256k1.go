//go:build libsecp256k1

package directory

/*
#include <stddef.h>

// The functions of bitcoin-core's libsecp256k1 that the checks call
// (include/secp256k1.h, secp256k1_extrakeys.h, secp256k1_schnorrsig.h of
// the copy go-nostr ships). go-nostr's libsecp256k1 build (v0.52.3
// signature_libsecp256k1.go) compiles that library into the binary; the
// declarations are weak so that this package builds on its own, and
// secpLinked tells whether the final link found them.
typedef struct secp256k1_context_struct secp256k1_context;
typedef struct { unsigned char data[64]; } secp256k1_xonly_pubkey;
#define HEARTH_SECP256K1_CONTEXT_NONE 1
extern secp256k1_context *secp256k1_context_create(unsigned int flags) __attribute__((weak));
extern int secp256k1_xonly_pubkey_parse(const secp256k1_context *ctx, secp256k1_xonly_pubkey *pubkey, const unsigned char *input32) __attribute__((weak));
extern int secp256k1_schnorrsig_verify(const secp256k1_context *ctx, const unsigned char *sig64, const unsigned char *msg, size_t msglen, const secp256k1_xonly_pubkey *pubkey) __attribute__((weak));

static secp256k1_context *hearth_secp_context(void) {
	if (!secp256k1_context_create || !secp256k1_xonly_pubkey_parse || !secp256k1_schnorrsig_verify) {
		return NULL;
	}
	return secp256k1_context_create(HEARTH_SECP256K1_CONTEXT_NONE);
}
*/
import "C"

import (
	"errors"
	"unsafe"

	"github.com/nbd-wtf/go-nostr"
)

// verifySignature checks evt's BIP-340 signature of hash (its id) with
// libsecp256k1 (C), several times faster than the pure-Go check; see
// xcaddy.md for building with it. Unlike go-nostr's CheckSignature it
// hashes nothing again (the id's hash is the message) and takes the
// pubkey's parsed form from pubkeys: parsing is a tenth of a check there.
func verifySignature(evt *nostr.Event, hash *[32]byte) bool {
	if secpContext == nil {
		ok, err := evt.CheckSignature()
		return err == nil && ok
	}
	pk, sig, ok := decodeKeyAndSig(evt.PubKey, evt.Sig)
	if !ok {
		return false
	}
	key, err := pubkeys.get(&pk, parseXOnly)
	if err != nil {
		return false
	}
	return C.secp256k1_schnorrsig_verify(secpContext, (*C.uchar)(unsafe.Pointer(&sig[0])),
		(*C.uchar)(unsafe.Pointer(&hash[0])), 32, &key) == 1
}

// secpContext is nil when the link did not bring libsecp256k1 (go-nostr
// built without it): the checks then go through go-nostr.
var secpContext = C.hearth_secp_context()

// secpLinked tells whether the checks call libsecp256k1 directly.
func secpLinked() bool { return secpContext != nil }

var pubkeys pubkeyCache[C.secp256k1_xonly_pubkey]

func parseXOnly(raw *[32]byte) (C.secp256k1_xonly_pubkey, error) {
	var key C.secp256k1_xonly_pubkey
	if C.secp256k1_xonly_pubkey_parse(secpContext, &key, (*C.uchar)(unsafe.Pointer(&raw[0]))) != 1 {
		return key, errors.New("not a point on the curve")
	}
	return key, nil
}
