package kv

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"time"

	"github.com/dgraph-io/badger/v4/pb"
	"google.golang.org/protobuf/proto"
)

// The backup stream every engine writes and reads is storage/backup.go's
// format 2, byte for byte: the header StreamMagic; frames, each an 8-byte
// little-endian length and a protobuf KVList (Badger's pb.KVList, the frames
// of badger.DB.Backup) of that length; and the end record: a length of all
// ones, StreamEndMagic, the number of frame bytes (lengths included), and
// the SHA-256 of everything before it. The records in the frames are
// engine-neutral (key, value, expires_at); Version is written as 1 (Badger's
// Load keeps it as the commit timestamp; every other engine ignores it).
// So a backup written by `caddy hearth backup` from a Badger store imports
// into PostgreSQL, and WriteStream's output restores with today's
// `caddy hearth restore`.
const (
	StreamMagic    = "HEARTH-BACKUP-2\n"
	StreamEndMagic = "HEARTH-BACKUP-END"
	streamEnd      = ^uint64(0)
	// maxFrame bounds one frame's length (storage/backup.go's
	// maxBackupFrame).
	maxFrame = 1 << 30
	// frameBytes is the size from which WriteStream starts a new frame.
	frameBytes = 4 << 20
)

// badgerBitDelete is Badger's meta bit of a delete marker (bitDelete in
// badger/v4 structs.go).
const badgerBitDelete = 1 << 0

// ErrNotStream is returned by ReadStream for input that is not a complete,
// intact format-2 backup.
var ErrNotStream = errors.New("not a complete Hearth backup")

// WriteStream writes a backup of e (e.Export: one snapshot) to w.
func WriteStream(ctx context.Context, w io.Writer, e Engine) error {
	h := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(w, h), 1<<20)
	if _, err := bw.WriteString(StreamMagic); err != nil {
		return err
	}
	var n uint64
	list := &pb.KVList{}
	size := 0
	flush := func() error {
		if len(list.Kv) == 0 {
			return nil
		}
		b, err := proto.Marshal(list)
		if err != nil {
			return err
		}
		var hdr [8]byte
		binary.LittleEndian.PutUint64(hdr[:], uint64(len(b)))
		if _, err := bw.Write(hdr[:]); err != nil {
			return err
		}
		if _, err := bw.Write(b); err != nil {
			return err
		}
		n += 8 + uint64(len(b))
		list.Kv, size = list.Kv[:0], 0
		return nil
	}
	err := e.Export(ctx, func(r Record) error {
		list.Kv = append(list.Kv, &pb.KV{
			Key:       bytes.Clone(r.Key),
			Value:     bytes.Clone(r.Value),
			UserMeta:  []byte{0},
			Version:   1,
			ExpiresAt: r.ExpiresAt,
			Meta:      []byte{0},
		})
		size += len(r.Key) + len(r.Value) + 32
		if size >= frameBytes {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return err
	}
	end := binary.LittleEndian.AppendUint64(nil, streamEnd)
	end = append(end, StreamEndMagic...)
	end = binary.LittleEndian.AppendUint64(end, n)
	if _, err := bw.Write(end); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	_, err = w.Write(h.Sum(nil))
	return err
}

// ReadStream checks that r is a complete, intact backup — spooling its
// frames to a temporary file in spoolDir ("" for the system's) while the
// checksum is computed — and only then returns a next function yielding its
// records (io.EOF after the last), suitable for Engine.Import, and a close
// function removing the spool. Input that is not a backup fails with
// ErrNotStream before any record is returned, so an Import of it changes
// nothing.
func ReadStream(r io.Reader, spoolDir string) (next func() (Record, error), closeFn func() error, err error) {
	f, err := os.CreateTemp(spoolDir, "hearth-restore-*.spool")
	if err != nil {
		return nil, nil, err
	}
	closeFn = func() error {
		f.Close()
		return os.Remove(f.Name())
	}
	if err := spoolFrames(f, bufio.NewReaderSize(r, 64<<10)); err != nil {
		closeFn()
		return nil, nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		closeFn()
		return nil, nil, err
	}
	br := bufio.NewReaderSize(f, 1<<20)
	var pending []*pb.KV
	var last []byte // the key of the record read last
	next = func() (Record, error) {
		for {
			for len(pending) == 0 {
				var hdr [8]byte
				if _, err := io.ReadFull(br, hdr[:]); err != nil {
					if errors.Is(err, io.EOF) {
						return Record{}, io.EOF
					}
					return Record{}, err
				}
				b := make([]byte, binary.LittleEndian.Uint64(hdr[:]))
				if _, err := io.ReadFull(br, b); err != nil {
					return Record{}, err
				}
				var list pb.KVList
				if err := proto.Unmarshal(b, &list); err != nil {
					return Record{}, fmt.Errorf("%w: a frame is not a record list: %v", ErrNotStream, err)
				}
				pending = list.Kv
			}
			kv := pending[0]
			pending = pending[1:]
			if last != nil && bytes.Equal(kv.Key, last) {
				// An older version of the key before: Badger's backup
				// stream lists every version of a key, newest first
				// (badger/v4 backup.go KeyToList); the newest is the
				// record.
				continue
			}
			last = append(last[:0], kv.Key...)
			if len(kv.Meta) > 0 && kv.Meta[0]&badgerBitDelete != 0 || kv.ExpiresAt != 0 && kv.ExpiresAt <= uint64(time.Now().Unix()) {
				// A delete marker of Badger's DB.Backup (older storage
				// backups carry them), or a record expired: not a record.
				continue
			}
			return Record{Key: kv.Key, Value: kv.Value, ExpiresAt: kv.ExpiresAt}, nil
		}
	}
	return next, closeFn, nil
}

// spoolFrames copies the frames of r to w and fails with ErrNotStream unless
// r is a whole format-2 backup with a matching byte count and checksum.
func spoolFrames(w io.Writer, r *bufio.Reader) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	var h hash.Hash = sha256.New()
	head := make([]byte, len(StreamMagic))
	if _, err := io.ReadFull(r, head); err != nil || string(head) != StreamMagic {
		return fmt.Errorf("%w: the input does not start with Hearth's backup header (format 2)", ErrNotStream)
	}
	h.Write(head)
	var n uint64
	for {
		var hdr [8]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return fmt.Errorf("%w: it ends without the end record (cut short?)", ErrNotStream)
		}
		h.Write(hdr[:])
		size := binary.LittleEndian.Uint64(hdr[:])
		if size == streamEnd {
			break
		}
		if size > maxFrame {
			return fmt.Errorf("%w: a frame of %d bytes (damaged?)", ErrNotStream, size)
		}
		bw.Write(hdr[:])
		c, err := io.CopyN(io.MultiWriter(bw, h), r, int64(size))
		if err != nil {
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("%w: it ends inside a frame (cut short?)", ErrNotStream)
			}
			return err
		}
		n += 8 + uint64(c)
	}
	end := make([]byte, len(StreamEndMagic)+8)
	if _, err := io.ReadFull(r, end); err != nil || string(end[:len(StreamEndMagic)]) != StreamEndMagic {
		return fmt.Errorf("%w: damaged end record", ErrNotStream)
	}
	h.Write(end)
	if binary.LittleEndian.Uint64(end[len(StreamEndMagic):]) != n {
		return fmt.Errorf("%w: the byte count does not match (damaged?)", ErrNotStream)
	}
	sum := make([]byte, sha256.Size)
	if _, err := io.ReadFull(r, sum); err != nil {
		return fmt.Errorf("%w: the checksum is missing (cut short?)", ErrNotStream)
	}
	if !bytes.Equal(sum, h.Sum(nil)) {
		return fmt.Errorf("%w: the checksum does not match (damaged?)", ErrNotStream)
	}
	if _, err := r.ReadByte(); err != io.EOF {
		return fmt.Errorf("%w: bytes after the end record", ErrNotStream)
	}
	return bw.Flush()
}
