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
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// The backup stream every engine writes and reads (format 3, engine-
// neutral): the header StreamMagic; frames, each an 8-byte little-endian
// length and that many bytes of records, a record being its key, its value
// (each a uvarint length and the bytes) and its expiry (a uvarint of Unix
// seconds, 0 for none), in key order; and the end record: a length of all
// ones, StreamEndMagic, the number of frame bytes (lengths included), and the
// SHA-256 of everything before it. A backup restores into either engine,
// whichever wrote it.
//
// Backups of earlier versions still read. Their frames hold protobuf
// KVLists (Badger's pb.KVList, the frames of badger.DB.Backup, decoded here
// with protowire): format 2 has the header "HEARTH-BACKUP-2\n" and the same
// end record and checksum; format 1, the first version's, has no header and
// an end record without the checksum, so its frames and end record are
// checked but a byte changed inside a record cannot be detected. Their
// streams may carry Badger's delete markers and older versions of a key
// (newest first), which are not records.
const (
	StreamMagic    = "HEARTH-BACKUP-3\n"
	StreamEndMagic = "HEARTH-BACKUP-END"
	streamMagic2   = "HEARTH-BACKUP-2\n"
	streamEnd      = ^uint64(0)
	// maxFrame bounds one frame's length: anything far beyond a writer's
	// frames (Badger's stream batches of about 100 MiB at most) is not a
	// Hearth backup.
	maxFrame = 1 << 30
	// frameBytes is the size from which WriteStream starts a new frame.
	frameBytes = 4 << 20
)

// The formats a stream is read in.
const (
	format1 = 1 // KVList frames, no header, no checksum
	format2 = 2 // KVList frames, header and checksum
	format3 = 3 // Hearth's records, header and checksum
)

// badgerBitDelete is Badger's meta bit of a delete marker (bitDelete in
// badger/v4 structs.go), in the KVLists of formats 1 and 2.
const badgerBitDelete = 1 << 0

// ErrNotStream is returned by ReadStream for input that is not a complete,
// intact backup.
var ErrNotStream = errors.New("not a complete Hearth backup")

// WriteStream writes a backup of e (e.Export: one snapshot) to w.
func WriteStream(ctx context.Context, w io.Writer, e Engine) error {
	sw, err := NewStreamWriter(w)
	if err != nil {
		return err
	}
	if err := e.Export(ctx, sw.Add); err != nil {
		return err
	}
	return sw.Close()
}

// StreamWriter writes a backup stream of the records given to Add, in the
// order given (key order for a backup).
type StreamWriter struct {
	w     io.Writer
	h     hash.Hash
	bw    *bufio.Writer
	n     uint64
	frame []byte
}

// NewStreamWriter starts a backup stream on w (the header is written).
func NewStreamWriter(w io.Writer) (*StreamWriter, error) {
	h := sha256.New()
	sw := &StreamWriter{w: w, h: h, bw: bufio.NewWriterSize(io.MultiWriter(w, h), 1<<20)}
	if _, err := sw.bw.WriteString(StreamMagic); err != nil {
		return nil, err
	}
	return sw, nil
}

// Add writes r (its slices are copied).
func (sw *StreamWriter) Add(r Record) error {
	sw.frame = protowire.AppendBytes(sw.frame, r.Key)
	sw.frame = protowire.AppendBytes(sw.frame, r.Value)
	sw.frame = protowire.AppendVarint(sw.frame, r.ExpiresAt)
	if len(sw.frame) >= frameBytes {
		return sw.flush()
	}
	return nil
}

func (sw *StreamWriter) flush() error {
	if len(sw.frame) == 0 {
		return nil
	}
	var hdr [8]byte
	binary.LittleEndian.PutUint64(hdr[:], uint64(len(sw.frame)))
	if _, err := sw.bw.Write(hdr[:]); err != nil {
		return err
	}
	if _, err := sw.bw.Write(sw.frame); err != nil {
		return err
	}
	sw.n += 8 + uint64(len(sw.frame))
	sw.frame = sw.frame[:0]
	return nil
}

// Close writes the last frame, the end record and the checksum (it does
// not close the underlying writer).
func (sw *StreamWriter) Close() error {
	if err := sw.flush(); err != nil {
		return err
	}
	end := binary.LittleEndian.AppendUint64(nil, streamEnd)
	end = append(end, StreamEndMagic...)
	end = binary.LittleEndian.AppendUint64(end, sw.n)
	if _, err := sw.bw.Write(end); err != nil {
		return err
	}
	if err := sw.bw.Flush(); err != nil {
		return err
	}
	_, err := sw.w.Write(sw.h.Sum(nil))
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
	sp, err := SpoolStream(r, spoolDir)
	if err != nil {
		return nil, nil, err
	}
	if next, err = sp.Records(); err != nil {
		sp.Close()
		return nil, nil, err
	}
	return next, sp.Close, nil
}

// Spool is a checked backup stream kept in a temporary file, whose records
// can be read more than once (a restore that runs again).
type Spool struct {
	f      *os.File
	format int
}

// SpoolStream checks r as ReadStream does and keeps its frames.
func SpoolStream(r io.Reader, spoolDir string) (*Spool, error) {
	f, err := os.CreateTemp(spoolDir, "hearth-restore-*.spool")
	if err != nil {
		return nil, err
	}
	sp := &Spool{f: f}
	if sp.format, err = spoolFrames(f, bufio.NewReaderSize(r, 64<<10)); err != nil {
		sp.Close()
		return nil, err
	}
	return sp, nil
}

// Close removes the spool.
func (sp *Spool) Close() error {
	sp.f.Close()
	return os.Remove(sp.f.Name())
}

// Records returns a next function yielding the spool's records from the
// first (io.EOF after the last); a second call starts over, and the
// earlier function must not be used any more.
func (sp *Spool) Records() (next func() (Record, error), err error) {
	if _, err := sp.f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(sp.f, 1<<20)
	var frame []byte // what is left of the frame read last
	var last []byte  // the key of the record read last
	now := uint64(time.Now().Unix())
	next = func() (Record, error) {
		for {
			for len(frame) == 0 {
				var hdr [8]byte
				if _, err := io.ReadFull(br, hdr[:]); err != nil {
					if errors.Is(err, io.EOF) {
						return Record{}, io.EOF
					}
					return Record{}, err
				}
				frame = make([]byte, binary.LittleEndian.Uint64(hdr[:]))
				if _, err := io.ReadFull(br, frame); err != nil {
					return Record{}, err
				}
			}
			var rec Record
			var live bool
			var err error
			if sp.format == format3 {
				rec, frame, err = readRecord(frame)
				live = true
			} else {
				rec, live, frame, err = readKVListEntry(frame)
			}
			if err != nil {
				return Record{}, fmt.Errorf("%w: %v", ErrNotStream, err)
			}
			if last != nil && bytes.Equal(rec.Key, last) {
				// An older version of the key before: Badger's backup
				// stream lists every version of a key, newest first
				// (badger/v4 backup.go KeyToList); the newest is the
				// record.
				continue
			}
			last = append(last[:0], rec.Key...)
			if !live || rec.ExpiresAt != 0 && rec.ExpiresAt <= now {
				// A delete marker of Badger's DB.Backup, or a record
				// expired: not a record.
				continue
			}
			return rec, nil
		}
	}
	return next, nil
}

// readRecord reads one format-3 record from the start of b.
func readRecord(b []byte) (Record, []byte, error) {
	key, n := protowire.ConsumeBytes(b)
	if n < 0 {
		return Record{}, nil, errors.New("a record's key is cut")
	}
	b = b[n:]
	val, n := protowire.ConsumeBytes(b)
	if n < 0 {
		return Record{}, nil, errors.New("a record's value is cut")
	}
	b = b[n:]
	exp, n := protowire.ConsumeVarint(b)
	if n < 0 {
		return Record{}, nil, errors.New("a record's expiry is cut")
	}
	return Record{Key: key, Value: val, ExpiresAt: exp}, b[n:], nil
}

// readKVListEntry reads the next KV of a KVList (field 1 of the list; other
// fields are passed over) from the start of b: its key, value and expiry, and
// whether it is a record rather than a delete marker.
func readKVListEntry(b []byte) (rec Record, live bool, rest []byte, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return Record{}, false, nil, errors.New("a frame is not a record list")
		}
		b = b[n:]
		if num != 1 || typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return Record{}, false, nil, errors.New("a frame is not a record list")
			}
			b = b[n:]
			continue
		}
		kvb, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return Record{}, false, nil, errors.New("a frame is not a record list")
		}
		rec, live, err = decodeKV(kvb)
		return rec, live, b[n:], err
	}
	// A list of no entry (only other fields): nothing more in the frame.
	return Record{}, false, nil, nil
}

// decodeKV decodes a pb.KV: key 1, value 2, expires_at 5, meta 6.
func decodeKV(b []byte) (rec Record, live bool, err error) {
	live = true
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return Record{}, false, errors.New("a record of the list is damaged")
		}
		b = b[n:]
		switch {
		case typ == protowire.BytesType && (num == 1 || num == 2 || num == 6):
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return Record{}, false, errors.New("a record of the list is cut")
			}
			switch num {
			case 1:
				rec.Key = v
			case 2:
				rec.Value = v
			case 6:
				live = len(v) == 0 || v[0]&badgerBitDelete == 0
			}
			b = b[n:]
		case typ == protowire.VarintType && num == 5:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return Record{}, false, errors.New("a record of the list is cut")
			}
			rec.ExpiresAt = v
			b = b[n:]
		default:
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return Record{}, false, errors.New("a record of the list is damaged")
			}
			b = b[n:]
		}
	}
	if rec.Value == nil {
		rec.Value = []byte{}
	}
	return rec, live, nil
}

// spoolFrames copies the frames of r to w and returns r's format; it fails
// with ErrNotStream unless r is a whole backup: a header of format 3 or 2
// with a matching byte count and checksum, or format 1's frames and end
// record.
func spoolFrames(w io.Writer, r *bufio.Reader) (int, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	var h hash.Hash
	format := format1
	head, _ := r.Peek(len(StreamMagic))
	switch string(head) {
	case StreamMagic:
		format = format3
	case streamMagic2:
		format = format2
	}
	if format != format1 {
		h = sha256.New()
		r.Discard(len(head))
		h.Write(head)
	} else if first, _ := r.Peek(8); len(first) == 8 && binary.LittleEndian.Uint64(first) > maxFrame {
		return 0, notABackup(fmt.Errorf("%w: the file does not start with Hearth's backup header (not a backup, or a damaged one)", ErrNotStream), false)
	}
	err := copyFrames(bw, r, h)
	if format == format1 {
		err = notABackup(err, len(head) == 0)
	}
	if err != nil {
		return 0, err
	}
	return format, bw.Flush()
}

// copyFrames copies frames from r to w until the end record, which it
// checks (with the checksum h computes unless h is nil, format 1), then
// checks that nothing follows.
func copyFrames(w io.Writer, r *bufio.Reader, h hash.Hash) error {
	var n uint64
	for {
		var hdr [8]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("%w: it ends without Hearth's end record (cut short?)", ErrNotStream)
			}
			return err
		}
		if h != nil {
			h.Write(hdr[:])
		}
		size := binary.LittleEndian.Uint64(hdr[:])
		if size == streamEnd {
			break
		}
		if size > maxFrame {
			return fmt.Errorf("%w: a frame of %d bytes (damaged?)", ErrNotStream, size)
		}
		if _, err := w.Write(hdr[:]); err != nil {
			return err
		}
		fw := w
		if h != nil {
			fw = io.MultiWriter(w, h)
		}
		c, err := io.CopyN(fw, r, int64(size))
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
		return fmt.Errorf("%w: a damaged end record", ErrNotStream)
	}
	if got := binary.LittleEndian.Uint64(end[len(StreamEndMagic):]); got != n {
		return fmt.Errorf("%w: the end record counts %d bytes, the file has %d", ErrNotStream, got, n)
	}
	if h != nil {
		h.Write(end)
		sum := make([]byte, sha256.Size)
		if _, err := io.ReadFull(r, sum); err != nil {
			return fmt.Errorf("%w: it ends inside the checksum (cut short?)", ErrNotStream)
		}
		if !bytes.Equal(sum, h.Sum(nil)) {
			return fmt.Errorf("%w: the checksum does not match (the file is damaged)", ErrNotStream)
		}
	}
	if _, err := r.ReadByte(); err != io.EOF {
		return fmt.Errorf("%w: data after the end record", ErrNotStream)
	}
	return nil
}

// notABackup words the refusal of a file without a backup header: most
// such files are not backups at all (someone picked the wrong file), and
// the reason found reading it as a backup of format 1 ("ends without
// Hearth's end record") would only puzzle them.
func notABackup(err error, empty bool) error {
	if !errors.Is(err, ErrNotStream) {
		return err
	}
	if empty {
		return fmt.Errorf("%w: the file is empty", ErrNotStream)
	}
	detail := strings.TrimPrefix(err.Error(), ErrNotStream.Error()+": ")
	return fmt.Errorf("%w: this file is not a Hearth backup (a backup made by caddy hearth backup starts with the line %s, this one does not; read as a backup from before that line, %s)",
		ErrNotStream, strings.TrimSpace(StreamMagic), detail)
}
