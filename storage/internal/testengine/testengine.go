// Package testengine is the one hook by which tests put the stores they
// open on PostgreSQL (HEARTH_TEST_ENGINE=postgres): storage.Prepare reads
// it, and the TestMain of storage and of its domain packages
// (storagetest.Main) set it. Nothing else sets it, so a running server
// never has it.
package testengine

// Postgres, when set, gives the store of dir its PostgreSQL database: the
// DSN and a table prefix, the same prefix each time dir is opened so that a
// reopened store finds its records; ok false keeps the store on Badger.
var Postgres func(dir string) (dsn, prefix string, ok bool)
