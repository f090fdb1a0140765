package export

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The spooled zip reads back, with its names, dates and contents, in Go's
// archive/zip and in Python's zipfile (another implementation, which
// checks every entry's CRC): with few entries, and with more than 65,535,
// where the Zip64 end records are needed.
func TestSpoolZipReadsBackInTwoReaders(t *testing.T) {
	for _, n := range []int{3, 70000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var buf bytes.Buffer
			z, err := newSpoolZip(&buf)
			if err != nil {
				t.Fatal(err)
			}
			when := time.Date(2024, 5, 6, 7, 8, 10, 0, time.UTC)
			name := func(i int) string { return fmt.Sprintf("markdown/%05d-pâte-%d.md", i, i) }
			for i := range n {
				w, err := z.CreateHeader(zipHeader(name(i), when.Add(time.Duration(i)*time.Second)))
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(w, "# Item %d\n\n%s", i, strings.Repeat("levain ", i%50))
			}
			if err := z.Close(); err != nil {
				t.Fatal(err)
			}
			r, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
			if err != nil || len(r.File) != n {
				t.Fatalf("archive/zip: %v, %d entries", err, len(r.File))
			}
			for _, i := range []int{0, n / 2, n - 1} {
				f := r.File[i]
				rc, err := f.Open()
				if err != nil {
					t.Fatal(err)
				}
				b, err := io.ReadAll(rc)
				rc.Close()
				want := fmt.Sprintf("# Item %d\n\n%s", i, strings.Repeat("levain ", i%50))
				if err != nil || string(b) != want || f.Name != name(i) || !f.Modified.Equal(when.Add(time.Duration(i)*time.Second)) {
					t.Fatalf("entry %d: %q %v %s %v", i, b, err, f.Name, f.Modified)
				}
			}
			p := filepath.Join(t.TempDir(), "x.zip")
			if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command("/usr/bin/python3", "-c", `import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
bad = z.testzip()
names = z.namelist()
print(len(names), bad, names[-1])`, p).CombinedOutput()
			if want := fmt.Sprintf("%d None %s\n", n, name(n-1)); err != nil || string(out) != want {
				t.Fatalf("python zipfile: %v %q, want %q", err, out, want)
			}
		})
	}
}
