// Command pgserver runs a throwaway PostgreSQL server for the benchmark
// scripts (bench/oauth.sh with ENGINE=postgres): initdb into a temp dir and
// pg_ctl start on 127.0.0.1:<port>, as storage/kv/pgkv/pgtest does for the
// tests (as the postgres user when run as root). It prints the DSN of a
// fresh database on stdout, then runs until SIGINT or SIGTERM, and stops and
// removes the server (one a killed pgserver left behind is removed by the
// next start on the same port).
//
// The server keeps PostgreSQL's durable defaults (fsync, synchronous_commit
// on), to compare with Badger's synced commits; -fast turns them off.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5"

	"github.com/hearthkit/caddy-hearth/storage/kv/pgkv/pgtest"
)

func main() {
	port := flag.Int("port", 15445, "port on 127.0.0.1")
	fast := flag.Bool("fast", false, "fsync and synchronous_commit off")
	flag.Parse()
	if !*fast {
		os.Setenv("HEARTH_TEST_POSTGRES_DURABLE", "1")
	}
	srv, err := pgtest.Start(*port)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgserver:", err)
		os.Exit(1)
	}
	defer srv.Stop()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, srv.DSN("postgres"))
	if err == nil {
		_, err = conn.Exec(ctx, "CREATE DATABASE bench TEMPLATE template0")
		conn.Close(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgserver: create database:", err)
		return
	}
	fmt.Println(srv.DSN("bench"))
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	<-stop
}
