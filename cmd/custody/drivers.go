package main

// The store drivers custody ships: a data folder (Badger) and PostgreSQL.
// Each registers itself with package storage; ledger.Open and ledger.Init
// find the one a location names (storage.Lookup).
import (
	_ "github.com/custodylog/custody/storage/badgerstore"
	_ "github.com/custodylog/custody/storage/pgstore"
)
