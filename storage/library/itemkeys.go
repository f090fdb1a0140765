package library

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hearthkit/caddy-hearth/storage"
)

// Keys of saved items (the layout is in saved.go) and the order-preserving
// encodings of their index keys.

func itemKey(memberID, id string) []byte { return storage.Key("u", memberID, "gql", "item", id) }

func contentKey(memberID, id string) []byte {
	return storage.Key("u", memberID, "gql", "content", id)
}

func urlKey(memberID, u string) []byte { return legacyURLKey(memberID, urlKeyForm(u)) }

func messageIDDigest(messageID string) string {
	sum := sha256.Sum256([]byte(messageID))
	return hex.EncodeToString(sum[:])
}

func messageIDKey(memberID, digest string) []byte {
	return storage.Key("u", memberID, "gql", "msgid", digest)
}

func itemMessageIDKey(memberID, itemID string) []byte {
	return storage.Key("u", memberID, "gql", "msgof", itemID)
}

func itemIndexPrefix(memberID, status string, f SortField) []byte {
	return appendItemIndexPrefix(nil, memberID, status, f)
}

func appendItemIndexPrefix(b []byte, memberID, status string, f SortField) []byte {
	return storage.AppendKey(b, "u", memberID, "gql", "ix", statusCode[status], sortFieldCode[f], "")
}

func labelItemKey(memberID, labelID, itemID string) []byte {
	return storage.Key("u", memberID, "gql", "li", labelID, itemID)
}

func encUint64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

// encTime encodes t as its Unix nanoseconds. Times outside what they can
// hold (before 1678 or after 2262; a search range such as saved:*..9999-12-31
// can name one) are clamped to the first or last of them, which keeps their
// order: UnixNano itself would overflow and turn a bound around.
func encTime(b []byte, t time.Time) []byte {
	var ns int64
	switch {
	case t.Before(minEncTime):
		ns = math.MinInt64
	case t.After(maxEncTime):
		ns = math.MaxInt64
	default:
		ns = t.UnixNano()
	}
	return encUint64(b, uint64(ns)^(1<<63))
}

func encFloat(b []byte, f float64) []byte {
	bits := math.Float64bits(f)
	if f >= 0 {
		bits ^= 1 << 63
	} else {
		bits = ^bits
	}
	return encUint64(b, bits)
}

func encInt(b []byte, v int64) []byte { return encUint64(b, uint64(v)^(1<<63)) }

// encString escapes 0x00 so that the encoding is prefix-free and orders like
// the string: 0x00 -> 0x00 0xFF, terminated by 0x00 0x01.
func encString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			b = append(b, 0, 0xff)
		} else {
			b = append(b, s[i])
		}
	}
	return append(b, 0, 1)
}

// titleSortKey is the case-insensitive title, cut to 128 bytes.
func titleSortKey(title string) string {
	s := strings.ToLower(strings.TrimSpace(title))
	if len(s) > 128 {
		s = s[:128]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
	}
	return s
}

func idBytes(id string) uint64 {
	n, _ := strconv.ParseUint(id, 10, 64)
	return n
}

func itemSortValue(it *SavedItem, f SortField) []byte { return appendItemSortValue(nil, it, f) }

// appendItemSortValue appends itemSortValue(it, f) to b.
func appendItemSortValue(b []byte, it *SavedItem, f SortField) []byte {
	switch f {
	case SortCreatedAt:
		b = encTime(b, it.CreatedAt)
	case SortUpdatedAt:
		b = encTime(b, it.UpdatedAt)
	case SortTitle:
		b = encString(b, titleSortKey(it.Title))
	case SortWordCount:
		b = encInt(b, int64(it.WordCount))
	case SortReadingProgress:
		b = encFloat(b, it.ReadingProgress)
	}
	return encUint64(b, idBytes(it.ID))
}

// --- order-preserving encodings ---

var (
	minEncTime = time.Unix(0, math.MinInt64)
	maxEncTime = time.Unix(0, math.MaxInt64)
)
