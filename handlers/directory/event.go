package directory

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip19"
)

// Limits on a single event, applied before any signature work.
const (
	MaxEventBytes     = 64 << 10 // one event as JSON
	MaxTags           = 64
	MaxTagElements    = 8
	MaxTagElementLen  = 1024
	MaxContentBytes   = 32 << 10
	maxKind           = 65535
	maxCreatedAtValue = 1 << 40
)

// wireEvent is an event as it arrives: every field required, with exact
// JSON types, so that a decoded event serializes back to the bytes its id
// was computed from.
type wireEvent struct {
	ID        *string     `json:"id"`
	PubKey    *string     `json:"pubkey"`
	CreatedAt *int64      `json:"created_at"`
	Kind      *int        `json:"kind"`
	Tags      *[][]string `json:"tags"`
	Content   *string     `json:"content"`
	Sig       *string     `json:"sig"`
}

// DecodeEvent decodes a NIP-01 event from JSON and checks its shape: all
// seven fields present with the right types, lowercase hex of the right
// lengths, bounded sizes. It does not check the id or the signature (see
// VerifyEvent). Errors are safe to show to the client.
func DecodeEvent(b []byte) (*nostr.Event, error) {
	if len(b) > MaxEventBytes {
		return nil, fmt.Errorf("event is larger than %d bytes", MaxEventBytes)
	}
	var w wireEvent
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&w); err != nil {
		return nil, fmt.Errorf("event is not a JSON object with NIP-01 fields: %s", jsonProblem(err))
	}
	if dec.More() {
		return nil, errors.New("unexpected data after the event")
	}
	switch {
	case w.ID == nil:
		return nil, errors.New("missing id")
	case w.PubKey == nil:
		return nil, errors.New("missing pubkey")
	case w.CreatedAt == nil:
		return nil, errors.New("missing created_at")
	case w.Kind == nil:
		return nil, errors.New("missing kind")
	case w.Tags == nil:
		return nil, errors.New("missing tags")
	case w.Content == nil:
		return nil, errors.New("missing content")
	case w.Sig == nil:
		return nil, errors.New("missing sig")
	}
	if !isLowerHex(*w.ID, 64) {
		return nil, errors.New("id must be 64 lowercase hex characters")
	}
	if !isLowerHex(*w.PubKey, 64) {
		return nil, errors.New("pubkey must be 64 lowercase hex characters")
	}
	if !isLowerHex(*w.Sig, 128) {
		return nil, errors.New("sig must be 128 lowercase hex characters")
	}
	if *w.CreatedAt < 0 || *w.CreatedAt > maxCreatedAtValue {
		return nil, errors.New("created_at is out of range")
	}
	if *w.Kind < 0 || *w.Kind > maxKind {
		return nil, errors.New("kind is out of range")
	}
	if len(*w.Content) > MaxContentBytes {
		return nil, fmt.Errorf("content is longer than %d bytes", MaxContentBytes)
	}
	if len(*w.Tags) > MaxTags {
		return nil, fmt.Errorf("more than %d tags", MaxTags)
	}
	tags := make(nostr.Tags, len(*w.Tags))
	for i, t := range *w.Tags {
		if t == nil {
			return nil, errors.New("a tag is null")
		}
		if len(t) == 0 || len(t) > MaxTagElements {
			return nil, fmt.Errorf("each tag must have 1 to %d elements", MaxTagElements)
		}
		for _, s := range t {
			if len(s) > MaxTagElementLen {
				return nil, fmt.Errorf("tag elements must be at most %d bytes", MaxTagElementLen)
			}
		}
		tags[i] = nostr.Tag(t)
	}
	return &nostr.Event{
		ID:        *w.ID,
		PubKey:    *w.PubKey,
		CreatedAt: nostr.Timestamp(*w.CreatedAt),
		Kind:      *w.Kind,
		Tags:      tags,
		Content:   *w.Content,
		Sig:       *w.Sig,
	}, nil
}

func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Sprintf("field %s has the wrong type", te.Field)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return "malformed JSON"
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "malformed JSON"
	}
	return "wrong JSON types"
}

// VerifyEvent checks that the id is the hash of the event and that the
// signature is the pubkey's. The message is the NIP-01 OK text.
//
// It does what go-nostr's CheckID and CheckSignature do (v0.52.3
// event.go, signature.go), with the event serialized and hashed once
// instead of twice (the id is the hash that is signed); the signature check
// itself is verifySignature, pure Go by default or libsecp256k1 with the
// libsecp256k1 build tag.
func VerifyEvent(evt *nostr.Event) error {
	hash := sha256.Sum256(evt.Serialize())
	var id [64]byte
	hex.Encode(id[:], hash[:])
	if string(id[:]) != evt.ID {
		return errors.New("invalid: event id does not match its content")
	}
	if !verifySignature(evt, &hash) {
		return errors.New("invalid: signature does not verify")
	}
	return nil
}

// verifyEvents runs VerifyEvent on the events of evts that want accepts
// (nil entries are skipped) and returns the errors by index, on every core
// (onCores).
func verifyEvents(evts []*nostr.Event, want func(*nostr.Event) bool) []error {
	errs := make([]error, len(evts))
	onCores(len(evts), func(i int) {
		if e := evts[i]; e != nil && want(e) {
			errs[i] = VerifyEvent(e)
		}
	})
	return errs
}

// onCores calls fn for 0 to n-1 on every core: signature checks are most
// of the cost of ingesting posts, so a batch is spread over all cores.
func onCores(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				fn(i)
			}
		})
	}
	wg.Wait()
}

func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// ErrInvalidPubkey: the text is neither an npub nor a hex public key.
var ErrInvalidPubkey = errors.New("invalid public key")

// ParsePubkey accepts an npub (NIP-19) or 64 hex characters and returns the
// lowercase hex public key.
func ParsePubkey(s string) (string, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "npub1") {
		prefix, v, err := nip19.Decode(s)
		if err != nil || prefix != "npub" {
			return "", fmt.Errorf("%w: %q is not a valid npub", ErrInvalidPubkey, s)
		}
		return v.(string), nil
	}
	l := strings.ToLower(s)
	if !isLowerHex(l, 64) {
		return "", fmt.Errorf("%w: %q is neither an npub nor 64 hex characters", ErrInvalidPubkey, s)
	}
	if !nostr.IsValidPublicKey(l) {
		return "", fmt.Errorf("%w: %q is not a point on the curve", ErrInvalidPubkey, s)
	}
	return l, nil
}

// Npub encodes a hex public key as an npub.
func Npub(pubkey string) string {
	s, err := nip19.EncodePublicKey(pubkey)
	if err != nil {
		return ""
	}
	return s
}
