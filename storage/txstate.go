package storage

import "context"

// A domain's state of a transaction and its commit hooks: what a domain
// package counts or collects while a transaction writes its records, and
// what it does with that before and after the commit, without the core
// naming any of it (as the record caches' kinds, NewCacheKind).

// maxTxStates bounds the kinds of transaction state (NewTxState): Tx holds
// a fixed array of them, so a transaction costs no allocation for a
// domain it does not touch.
const maxTxStates = 4

// TxState is one kind of a domain's per-transaction state, of type T. A
// package declares it in a package-level variable (NewTxState); each
// transaction then has a slot for it, empty until the domain asks for its
// state (Of) the first time in that transaction.
type TxState[T any] struct{ i int }

// txStates counts the kinds declared; written only by NewTxState during
// package initialization (declared kinds for cacheKinds' reason).
var txStates int

// NewTxState declares a kind of transaction state. Call it only to
// initialize a package-level variable.
func NewTxState[T any]() *TxState[T] {
	if txStates == maxTxStates {
		panic("storage: more kinds of transaction state than maxTxStates")
	}
	k := &TxState[T]{i: txStates}
	txStates++
	return k
}

// Of returns tx's state of this kind, made (zero) the first time. A retry
// of the transaction's function (Update after a conflict) starts with none.
func (k *TxState[T]) Of(tx *Tx) *T {
	if v, ok := tx.state[k.i].(*T); ok {
		return v
	}
	v := new(T)
	tx.state[k.i] = v
	return v
}

// Peek returns tx's state of this kind, or nil when the transaction made
// none (it wrote no records of the domain).
func (k *TxState[T]) Peek(tx *Tx) *T {
	v, _ := tx.state[k.i].(*T)
	return v
}

// commitHooks are the hooks registered with OnCommit, in order.
// commitHooks are the domain packages' (OnCommit): a registry, since
// storage cannot import the packages above it.
var commitHooks []commitHook

type commitHook struct {
	before func(tx *Tx) error
	after  func(ctx context.Context, s *Store, tx *Tx) error
}

// OnCommit registers hooks around the commit of every read-write
// transaction (Update, UpdateAsync, UpdateOnce). before, when not nil,
// runs inside the transaction once its function returned nil: what it
// writes commits with the rest (the record caches see it), and its error
// aborts the transaction (a conflict retries the whole function). after,
// when not nil, runs once the transaction has committed and this node's
// record caches dropped what it wrote: its error is the Update's, though
// the commit stays. Both run for every transaction: they return at once
// when it holds no state of theirs (TxState.Peek), so a transaction of
// another domain costs a call and no allocation. Call it from an init
// function.
func OnCommit(before func(tx *Tx) error, after func(ctx context.Context, s *Store, tx *Tx) error) {
	commitHooks = append(commitHooks, commitHook{before: before, after: after})
}

// beforeCommit runs the before hooks (OnCommit).
func (tx *Tx) beforeCommit() error {
	for _, h := range commitHooks {
		if h.before != nil {
			if err := h.before(tx); err != nil {
				return err
			}
		}
	}
	return nil
}

// afterCommit runs the after hooks of a committed transaction (OnCommit);
// all run, and the first error is returned.
func (s *Store) afterCommit(ctx context.Context, tx *Tx) error {
	var first error
	for _, h := range commitHooks {
		if h.after != nil {
			if err := h.after(ctx, s, tx); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}
