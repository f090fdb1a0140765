// Package softauthn is a WebAuthn authenticator in software for tests: it
// answers the options a relying party sends as a browser with a platform
// authenticator does (the JSON of navigator.credentials.create and get,
// with the browser's clientDataJSON), with real ES256 keys, CBOR
// attestation objects ("none" attestation) and signatures over the
// authenticator data and the client data's hash (WebAuthn Level 3 §6.1,
// §6.3.3, §6.5). It keeps discoverable credentials: an assertion without
// allowCredentials picks the credential of the RP ID.
package softauthn

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"

	"github.com/go-webauthn/webauthn/protocol/webauthncbor"
)

// Authenticator holds credentials.
type Authenticator struct {
	// UserVerified: the authenticator verified the person (a PIN, a
	// fingerprint); the UV flag is set.
	UserVerified bool
	creds        []*Credential
}

// Credential is one key the authenticator made.
type Credential struct {
	ID         []byte
	RPID       string
	UserHandle []byte
	Key        *ecdsa.PrivateKey
	Count      uint32
}

// Credentials are the credentials made so far.
func (a *Authenticator) Credentials() []*Credential { return a.creds }

var b64 = base64.RawURLEncoding

func decode(s string) ([]byte, error) {
	// Relying parties send unpadded base64url; accept padding too.
	b, err := b64.DecodeString(s)
	if err != nil {
		return base64.URLEncoding.DecodeString(s)
	}
	return b, nil
}

type creationOptions struct {
	PublicKey struct {
		Challenge string `json:"challenge"`
		RP        struct {
			ID string `json:"id"`
		} `json:"rp"`
		User struct {
			ID string `json:"id"`
		} `json:"user"`
		ExcludeCredentials []struct {
			ID string `json:"id"`
		} `json:"excludeCredentials"`
	} `json:"publicKey"`
}

type requestOptions struct {
	PublicKey struct {
		Challenge        string `json:"challenge"`
		RPID             string `json:"rpId"`
		AllowCredentials []struct {
			ID string `json:"id"`
		} `json:"allowCredentials"`
		UserVerification string `json:"userVerification"`
	} `json:"publicKey"`
}

// ErrExcluded: the authenticator already holds a credential the options
// exclude (a browser reports InvalidStateError).
var ErrExcluded = errors.New("softauthn: a credential of this authenticator is excluded")

// ErrNoCredential: no credential fits the request (a browser reports
// NotAllowedError).
var ErrNoCredential = errors.New("softauthn: no credential for this request")

func (a *Authenticator) flags() byte {
	f := byte(0x01) // UP
	if a.UserVerified {
		f |= 0x04 // UV
	}
	return f
}

func clientData(typ string, challenge, origin string) []byte {
	b, _ := json.Marshal(map[string]any{"type": typ, "challenge": challenge, "origin": origin, "crossOrigin": false})
	return b
}

// Create answers creation options (the JSON a relying party sends, with
// publicKey) from origin, making a new credential; it returns the
// PublicKeyCredential as the browser's JSON.
func (a *Authenticator) Create(optionsJSON []byte, origin string) ([]byte, error) {
	var o creationOptions
	if err := json.Unmarshal(optionsJSON, &o); err != nil {
		return nil, err
	}
	for _, ex := range o.PublicKey.ExcludeCredentials {
		id, _ := decode(ex.ID)
		for _, c := range a.creds {
			if string(c.ID) == string(id) {
				return nil, ErrExcluded
			}
		}
	}
	user, err := decode(o.PublicKey.User.ID)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	id := make([]byte, 32)
	_, _ = rand.Read(id)
	c := &Credential{ID: id, RPID: o.PublicKey.RP.ID, UserHandle: user, Key: key}
	pub, err := key.PublicKey.Bytes() // 0x04 || X || Y
	if err != nil {
		return nil, err
	}
	cose, err := webauthncbor.Marshal(map[int]any{1: 2, 3: -7, -1: 1, -2: pub[1:33], -3: pub[33:]})
	if err != nil {
		return nil, err
	}
	rpHash := sha256.Sum256([]byte(c.RPID))
	auth := append([]byte{}, rpHash[:]...)
	auth = append(auth, a.flags()|0x40) // AT: attested credential data follows
	auth = binary.BigEndian.AppendUint32(auth, c.Count)
	auth = append(auth, make([]byte, 16)...) // AAGUID: none
	auth = binary.BigEndian.AppendUint16(auth, uint16(len(id)))
	auth = append(auth, id...)
	auth = append(auth, cose...)
	att, err := webauthncbor.Marshal(map[string]any{"fmt": "none", "attStmt": map[string]any{}, "authData": auth})
	if err != nil {
		return nil, err
	}
	a.creds = append(a.creds, c)
	return json.Marshal(map[string]any{
		"id": b64.EncodeToString(id), "rawId": b64.EncodeToString(id), "type": "public-key",
		"response": map[string]any{
			"clientDataJSON":    b64.EncodeToString(clientData("webauthn.create", o.PublicKey.Challenge, origin)),
			"attestationObject": b64.EncodeToString(att),
			"transports":        []string{"internal"},
		},
	})
}

// Get answers request options from origin with a credential of their RP
// ID (one of allowCredentials when they name some) and returns the
// PublicKeyCredential as the browser's JSON.
func (a *Authenticator) Get(optionsJSON []byte, origin string) ([]byte, error) {
	var o requestOptions
	if err := json.Unmarshal(optionsJSON, &o); err != nil {
		return nil, err
	}
	var c *Credential
	for _, cand := range a.creds {
		if cand.RPID != o.PublicKey.RPID {
			continue
		}
		if len(o.PublicKey.AllowCredentials) == 0 {
			c = cand
			break
		}
		for _, al := range o.PublicKey.AllowCredentials {
			if id, _ := decode(al.ID); string(id) == string(cand.ID) {
				c = cand
			}
		}
		if c != nil {
			break
		}
	}
	if c == nil {
		return nil, ErrNoCredential
	}
	return a.Sign(c, o.PublicKey.Challenge, o.PublicKey.RPID, origin)
}

// Sign makes c's assertion for challenge (as sent, base64url) with rpID's
// hash, from origin. Tests use it to answer with a wrong RP ID or origin.
func (a *Authenticator) Sign(c *Credential, challenge, rpID, origin string) ([]byte, error) {
	c.Count++
	cd := clientData("webauthn.get", challenge, origin)
	rpHash := sha256.Sum256([]byte(rpID))
	auth := append([]byte{}, rpHash[:]...)
	auth = append(auth, a.flags())
	auth = binary.BigEndian.AppendUint32(auth, c.Count)
	cdHash := sha256.Sum256(cd)
	digest := sha256.Sum256(append(append([]byte{}, auth...), cdHash[:]...))
	sig, err := ecdsa.SignASN1(rand.Reader, c.Key, digest[:])
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{
		"id": b64.EncodeToString(c.ID), "rawId": b64.EncodeToString(c.ID), "type": "public-key",
		"response": map[string]any{
			"clientDataJSON":    b64.EncodeToString(cd),
			"authenticatorData": b64.EncodeToString(auth),
			"signature":         b64.EncodeToString(sig),
			"userHandle":        b64.EncodeToString(c.UserHandle),
		},
	})
}
