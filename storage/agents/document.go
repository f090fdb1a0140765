package agents

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/hearthkit/caddy-hearth/storage"
	"strconv"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// The agent directory's published document (handlers/directory): the node
// leading a directory builds it and stores it here, and every other node
// serving that directory loads it, so all serve the same bytes, ETag and
// generated_at.
//
//	agent/pub/<directory id>        PublishedDirectory (JSON), with a TTL
//	agent/pubc/<directory id>/<n>   part n of the zstd-compressed body, with a TTL
//
// A directory id names one configuration of the document (handlers/directory
// derives it from its options), so two sites on one store with different
// documents keep two.

func dirPubKey(id string) []byte { return storage.Key("agent", "pub", id) }
func dirPubChunkKey(id string, n int) []byte {
	return storage.Key("agent", "pubc", id, strconv.Itoa(n))
}

// DirectoryChannel is the notification channel of published documents:
// the payload is "<directory id> <version>".
const DirectoryChannel = "hearth_directory"

// dirPubChunk is the size of one stored part of a compressed document.
const dirPubChunk = 4 << 20

// MaxDirectoryDocument bounds a published document's body (bytes, before
// compression): a body that decompresses to more is refused.
const MaxDirectoryDocument = 1 << 30

// PublishedDirectory is a directory document as its leader published it.
type PublishedDirectory struct {
	// Version is unique to each publication (followers compare it).
	Version     string `json:"v"`
	ETag        string `json:"etag"`
	GeneratedAt int64  `json:"generated_at"`
	// AgentsSum is the hex SHA-256 of the document's agents array.
	AgentsSum string `json:"agents_sum"`
	Count     int    `json:"count"`
	Size      int    `json:"size"`
	Parts     int    `json:"parts"`
	// Body is the document; not part of the record's JSON.
	Body []byte `json:"-"`
}

var dirDocCodec = sync.OnceValue(func() (c struct {
	enc *zstd.Encoder
	dec *zstd.Decoder
}) {
	var err error
	c.enc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	if err != nil {
		panic(err) // only for invalid options
	}
	c.dec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(MaxDirectoryDocument))
	if err != nil {
		panic(err)
	}
	return c
})

// PublishDocument stores doc (Body, ETag, GeneratedAt, AgentsSum,
// Count) as directory id's document with a new Version, which it returns,
// and notifies DirectoryChannel in the same transaction. The record lives
// DirectoryStampTTL unless published again.
func (s Store) PublishDocument(ctx context.Context, id string, doc *PublishedDirectory) (string, error) {
	if id == "" || len(doc.Body) > MaxDirectoryDocument {
		return "", storage.Invalid("a published directory document needs an id and at most %d bytes", MaxDirectoryDocument)
	}
	var v [8]byte
	_, _ = rand.Read(v[:])
	rec := *doc
	rec.Body = nil
	rec.Version = hex.EncodeToString(v[:])
	rec.Size = len(doc.Body)
	packed := dirDocCodec().enc.EncodeAll(doc.Body, nil)
	rec.Parts = (len(packed) + dirPubChunk - 1) / dirPubChunk
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		var old PublishedDirectory
		oldParts := 0
		switch err := tx.GetJSON(dirPubKey(id), &old); {
		case err == nil:
			oldParts = old.Parts
		case !errors.Is(err, storage.ErrNotFound):
			return err
		}
		for n := 0; n < rec.Parts; n++ {
			part := packed[n*dirPubChunk : min((n+1)*dirPubChunk, len(packed))]
			if err := tx.Put(dirPubChunkKey(id, n), part, DirectoryStampTTL); err != nil {
				return err
			}
		}
		for n := rec.Parts; n < oldParts; n++ {
			if err := tx.Delete(dirPubChunkKey(id, n)); err != nil {
				return err
			}
		}
		if err := tx.PutJSON(dirPubKey(id), &rec, DirectoryStampTTL); err != nil {
			return err
		}
		return tx.Notify(DirectoryChannel, id+" "+rec.Version)
	})
	if err != nil {
		return "", err
	}
	return rec.Version, nil
}

// PublishedVersion returns the Version of directory id's published
// document ("" when there is none).
func (s Store) PublishedVersion(ctx context.Context, id string) (string, error) {
	var rec PublishedDirectory
	err := s.st.View(ctx, func(tx *storage.Tx) error { return tx.GetJSON(dirPubKey(id), &rec) })
	if errors.Is(err, storage.ErrNotFound) {
		return "", nil
	}
	return rec.Version, err
}

// PublishedDocument returns directory id's published document,
// read in one snapshot; storage.ErrNotFound when there is none.
func (s Store) PublishedDocument(ctx context.Context, id string) (*PublishedDirectory, error) {
	var rec PublishedDirectory
	var packed []byte
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		packed = packed[:0]
		if err := tx.GetJSON(dirPubKey(id), &rec); err != nil {
			return err
		}
		for n := 0; n < rec.Parts; n++ {
			b, err := tx.Get(dirPubChunkKey(id, n))
			if err != nil {
				if errors.Is(err, storage.ErrNotFound) {
					return fmt.Errorf("published directory document %s: part %d is missing", id, n)
				}
				return err
			}
			packed = append(packed, b...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if rec.Size < 0 || rec.Size > MaxDirectoryDocument {
		return nil, fmt.Errorf("published directory document %s: size %d out of range", id, rec.Size)
	}
	body, err := dirDocCodec().dec.DecodeAll(packed, make([]byte, 0, rec.Size))
	if err != nil {
		return nil, fmt.Errorf("published directory document %s: %w", id, err)
	}
	if len(body) != rec.Size {
		return nil, fmt.Errorf("published directory document %s: %d bytes, the record says %d", id, len(body), rec.Size)
	}
	rec.Body = body
	return &rec, nil
}
