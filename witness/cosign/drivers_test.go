package cosign_test

// Link both store drivers (they register with package storage), so that
// ledger.Open and ledger.Init open data folders and PostgreSQL URLs.
import (
	_ "github.com/custodylog/custody/storage/badgerstore"
	_ "github.com/custodylog/custody/storage/pgstore"
)
