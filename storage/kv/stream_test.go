package kv_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"testing"

	"github.com/dgraph-io/badger/v4/pb"
	"google.golang.org/protobuf/proto"

	"github.com/hearthkit/caddy-hearth/storage/kv"
)

// A backup of format 2 (Badger's frames, decoded without Badger) written by
// Badger's stream lists every version of a key, newest first: only the newest is a record (reading the older ones after it made
// an import keep an old value, or pick one at random). And a backup written
// by Badger's DB.Backup (storage.Backup before it left them out) carries
// delete markers: a key with no value and Meta's bit 0
// (Badger's bitDelete). Read as records they brought deleted keys back,
// with empty values, into the engine that imported the backup.
func TestReadStreamSkipsBadgerDeleteMarkers(t *testing.T) {
	list := &pb.KVList{Kv: []*pb.KV{
		{Key: []byte("member/name/alice"), Value: []byte("1"), Version: 3, Meta: []byte{0}},
		// Older versions of a key follow its newest in Badger's stream.
		{Key: []byte("member/name/alice"), Value: []byte("0"), Version: 2, Meta: []byte{0}},
		{Key: []byte("member/name/gone"), Version: 4, Meta: []byte{1}},
		{Key: []byte("session/expired"), Value: []byte("x"), Version: 2, ExpiresAt: 1, Meta: []byte{0}},
	}}
	frame, err := proto.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.WriteString("HEARTH-BACKUP-2\n") // format 2
	b.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(frame))))
	b.Write(frame)
	b.Write(binary.LittleEndian.AppendUint64(nil, ^uint64(0)))
	b.WriteString(kv.StreamEndMagic)
	b.Write(binary.LittleEndian.AppendUint64(nil, uint64(8+len(frame))))
	sum := sha256.Sum256(b.Bytes())
	b.Write(sum[:])

	next, closeFn, err := kv.ReadStream(bytes.NewReader(b.Bytes()), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	var keys, vals []string
	for {
		r, err := next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		keys, vals = append(keys, string(r.Key)), append(vals, string(r.Value))
	}
	if len(keys) != 1 || keys[0] != "member/name/alice" || vals[0] != "1" {
		t.Fatalf("records read: %q = %q; want only member/name/alice = 1 (its newest version)", keys, vals)
	}
}
