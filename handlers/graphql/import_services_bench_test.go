package graphql_test

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/hearthkit/caddy-hearth/bench/importfiles"
)

// A 10,000-row Readwise Reader CSV, and Pocket's zip of 10,000 rows with
// 5,000 highlights (annotations/part_000000.json), imported as
// BenchmarkImportPocketCSV10k is (rows written, no fetches). The same
// files as bench/imports.sh imports through `caddy hearth import`.
// Figures: bench/README.md.
func BenchmarkImportReadwiseReaderCSV10k(b *testing.B) {
	benchmarkImport(b, writeImportFile(b, "readwise.csv", func(w io.Writer) error { return importfiles.ReadwiseReaderCSV(w, 10000) }), 10000)
}

func BenchmarkImportPocketZipHighlights10k(b *testing.B) {
	benchmarkImport(b, writeImportFile(b, "pocket.zip", func(w io.Writer) error { return importfiles.PocketZip(w, 10000) }), 10000)
}

func writeImportFile(b *testing.B, name string, write func(io.Writer) error) string {
	p := filepath.Join(b.TempDir(), name)
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	if err := write(f); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return p
}
