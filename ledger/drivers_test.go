package ledger

// The ledger imports no store driver (TestImportsNoDriver); its tests
// link both, as a program does, to open data folders and databases by
// location.
import (
	_ "github.com/custodylog/custody/storage/badgerstore"
	_ "github.com/custodylog/custody/storage/pgstore"
)
