package export

import (
	"archive/zip"
	"bufio"
	"compress/flate"
	"encoding/binary"
	"errors"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"time"
	"unicode/utf8"
)

// spoolZip writes a zip archive as archive/zip's Writer does (deflated
// entries with a data descriptor, an extended-timestamp field, Zip64
// records when the counts or offsets need them), but keeps the central
// directory in a temporary file until the end instead of in memory:
// zip.Writer holds about 200 bytes an entry for the whole archive, which
// made the export's memory grow with the library (one Markdown file an
// item). APPNOTE.TXT 6.3.10 (PKWARE) is the format.
type spoolZip struct {
	out   *countingWriter
	dir   *os.File
	dirw  *bufio.Writer
	n     uint64
	fw    *flate.Writer
	cur   *spoolEntry
	err   error
	ended bool
}

type spoolEntry struct {
	name     string
	modified time.Time
	offset   uint64
	start    uint64 // output offset where the data begins
	crc      hash.Hash32
	size     uint64
	deflate  bool
}

type countingWriter struct {
	w io.Writer
	n uint64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += uint64(n)
	return n, err
}

// newSpoolZip writes a zip to w, its directory spooled in a file of the
// system's temporary directory (removed by Close).
func newSpoolZip(w io.Writer) (*spoolZip, error) {
	f, err := os.CreateTemp("", "hearth-zipdir-*")
	if err != nil {
		return nil, err
	}
	_ = os.Remove(f.Name()) // unlinked: nothing is left behind, even after a crash
	fw, _ := flate.NewWriter(nil, flate.DefaultCompression)
	return &spoolZip{out: &countingWriter{w: w}, dir: f, dirw: bufio.NewWriterSize(f, 32<<10), fw: fw}, nil
}

// CreateHeader starts an entry named fh.Name, dated fh.Modified, deflated
// unless fh.Method is zip.Store; the previous entry ends.
func (z *spoolZip) CreateHeader(fh *zip.FileHeader) (io.Writer, error) {
	if err := z.finish(); err != nil {
		return nil, err
	}
	e := &spoolEntry{name: fh.Name, modified: fh.Modified, offset: z.out.n, crc: crc32.NewIEEE(), deflate: fh.Method != zip.Store}
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, 0x04034b50)
	b = binary.LittleEndian.AppendUint16(b, 20) // version needed: 2.0
	b = binary.LittleEndian.AppendUint16(b, e.flags())
	b = binary.LittleEndian.AppendUint16(b, e.method())
	t, d := msDosTime(e.modified)
	b = binary.LittleEndian.AppendUint16(b, t)
	b = binary.LittleEndian.AppendUint16(b, d)
	b = append(b, make([]byte, 12)...) // crc and sizes: in the data descriptor
	ext := e.timeExtra()
	b = binary.LittleEndian.AppendUint16(b, uint16(len(e.name)))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(ext)))
	b = append(b, e.name...)
	b = append(b, ext...)
	if _, err := z.out.Write(b); err != nil {
		z.err = err
		return nil, err
	}
	e.start = z.out.n
	z.cur = e
	if e.deflate {
		z.fw.Reset(z.out)
		return &entryWriter{z: z, w: z.fw}, nil
	}
	return &entryWriter{z: z, w: z.out}, nil
}

type entryWriter struct {
	z *spoolZip
	w io.Writer
}

func (w *entryWriter) Write(p []byte) (int, error) {
	if w.z.err != nil {
		return 0, w.z.err
	}
	w.z.cur.crc.Write(p)
	w.z.cur.size += uint64(len(p))
	n, err := w.w.Write(p)
	if err != nil {
		w.z.err = err
	}
	return n, err
}

func (e *spoolEntry) flags() uint16 {
	f := uint16(0x8) // sizes and crc in a data descriptor
	for i := 0; i < len(e.name); i++ {
		if e.name[i] >= utf8.RuneSelf {
			return f | 0x800 // the name is UTF-8
		}
	}
	return f
}

func (e *spoolEntry) method() uint16 {
	if e.deflate {
		return zip.Deflate
	}
	return zip.Store
}

// timeExtra is the extended-timestamp field (0x5455) with the
// modification time, as zip.Writer writes it.
func (e *spoolEntry) timeExtra() []byte {
	var b []byte
	b = binary.LittleEndian.AppendUint16(b, 0x5455)
	b = binary.LittleEndian.AppendUint16(b, 5)
	b = append(b, 1)
	return binary.LittleEndian.AppendUint32(b, uint32(e.modified.Unix()))
}

// finish ends the current entry: its data descriptor written, its central
// directory record spooled.
func (z *spoolZip) finish() error {
	if z.err != nil {
		return z.err
	}
	e := z.cur
	if e == nil {
		return nil
	}
	z.cur = nil
	if e.deflate {
		if z.err = z.fw.Close(); z.err != nil {
			return z.err
		}
	}
	csize := z.out.n - e.start
	if csize >= 0xffffffff || e.size >= 0xffffffff {
		z.err = errors.New("a zip entry is larger than 4 GiB")
		return z.err
	}
	crc := e.crc.Sum32()
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, 0x08074b50)
	b = binary.LittleEndian.AppendUint32(b, crc)
	b = binary.LittleEndian.AppendUint32(b, uint32(csize))
	b = binary.LittleEndian.AppendUint32(b, uint32(e.size))
	if _, z.err = z.out.Write(b); z.err != nil {
		return z.err
	}
	needed := uint16(20)
	offset := uint32(e.offset)
	var z64 []byte
	if e.offset >= 0xffffffff {
		needed, offset = 45, 0xffffffff
		z64 = binary.LittleEndian.AppendUint16(z64, 0x0001)
		z64 = binary.LittleEndian.AppendUint16(z64, 8)
		z64 = binary.LittleEndian.AppendUint64(z64, e.offset)
	}
	ext := append(z64, e.timeExtra()...)
	b = b[:0]
	b = binary.LittleEndian.AppendUint32(b, 0x02014b50)
	b = binary.LittleEndian.AppendUint16(b, needed) // made by: MS-DOS, as zip.Writer without a mode
	b = binary.LittleEndian.AppendUint16(b, needed)
	b = binary.LittleEndian.AppendUint16(b, e.flags())
	b = binary.LittleEndian.AppendUint16(b, e.method())
	t, d := msDosTime(e.modified)
	b = binary.LittleEndian.AppendUint16(b, t)
	b = binary.LittleEndian.AppendUint16(b, d)
	b = binary.LittleEndian.AppendUint32(b, crc)
	b = binary.LittleEndian.AppendUint32(b, uint32(csize))
	b = binary.LittleEndian.AppendUint32(b, uint32(e.size))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(e.name)))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(ext)))
	b = append(b, make([]byte, 10)...) // comment length, disk, internal and external attributes
	b = binary.LittleEndian.AppendUint32(b, offset)
	b = append(b, e.name...)
	b = append(b, ext...)
	if _, z.err = z.dirw.Write(b); z.err != nil {
		return z.err
	}
	z.n++
	return nil
}

// Close ends the last entry, copies the central directory after the
// entries and writes the end records; the spool file is closed.
func (z *spoolZip) Close() error {
	if z.ended {
		return z.err
	}
	z.ended = true
	defer z.dir.Close()
	if err := z.finish(); err != nil {
		return err
	}
	if z.err = z.dirw.Flush(); z.err != nil {
		return z.err
	}
	start := z.out.n
	if _, z.err = z.dir.Seek(0, io.SeekStart); z.err != nil {
		return z.err
	}
	if _, z.err = io.Copy(z.out, z.dir); z.err != nil {
		return z.err
	}
	end := z.out.n
	size := end - start
	records, offset, dsize := z.n, start, size
	var b []byte
	if records >= 0xffff || size >= 0xffffffff || offset >= 0xffffffff {
		// Zip64 end of central directory record and locator.
		b = binary.LittleEndian.AppendUint32(b, 0x06064b50)
		b = binary.LittleEndian.AppendUint64(b, 44)
		b = binary.LittleEndian.AppendUint16(b, 45)
		b = binary.LittleEndian.AppendUint16(b, 45)
		b = binary.LittleEndian.AppendUint32(b, 0)
		b = binary.LittleEndian.AppendUint32(b, 0)
		b = binary.LittleEndian.AppendUint64(b, records)
		b = binary.LittleEndian.AppendUint64(b, records)
		b = binary.LittleEndian.AppendUint64(b, size)
		b = binary.LittleEndian.AppendUint64(b, offset)
		b = binary.LittleEndian.AppendUint32(b, 0x07064b50)
		b = binary.LittleEndian.AppendUint32(b, 0)
		b = binary.LittleEndian.AppendUint64(b, end)
		b = binary.LittleEndian.AppendUint32(b, 1)
		records, dsize, offset = 0xffff, 0xffffffff, 0xffffffff
	}
	b = binary.LittleEndian.AppendUint32(b, 0x06054b50)
	b = binary.LittleEndian.AppendUint32(b, 0) // this disk, the directory's disk
	b = binary.LittleEndian.AppendUint16(b, uint16(records))
	b = binary.LittleEndian.AppendUint16(b, uint16(records))
	b = binary.LittleEndian.AppendUint32(b, uint32(dsize))
	b = binary.LittleEndian.AppendUint32(b, uint32(offset))
	b = binary.LittleEndian.AppendUint16(b, 0) // comment length
	_, z.err = z.out.Write(b)
	return z.err
}

// Abort removes the spool file without ending the archive.
func (z *spoolZip) Abort() {
	if !z.ended {
		z.ended = true
		z.dir.Close()
	}
}

// msDosTime is t (UTC) in MS-DOS time and date fields, as zip.Writer
// writes them; before 1980 it is 1980-01-01.
func msDosTime(t time.Time) (tm, date uint16) {
	t = t.UTC()
	if t.Year() < 1980 {
		t = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	date = uint16(t.Day() + int(t.Month())<<5 + (t.Year()-1980)<<9)
	tm = uint16(t.Second()/2 + t.Minute()<<5 + t.Hour()<<11)
	return tm, date
}
