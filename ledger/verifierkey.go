package ledger

import (
	"os"
	"path/filepath"

	"github.com/custodylog/custody/storage"
)

// configFiles reads the log's config and key files: a store, or a data
// folder whose database is not opened (FolderVerifierKey).
type configFiles interface {
	ReadFile(name string) ([]byte, error)
	Location() string
}

// folderFiles is a data folder's files, read without its database.
type folderFiles string

func (d folderFiles) ReadFile(name string) ([]byte, error) {
	if !filepath.IsAbs(name) {
		name = filepath.Join(string(d), filepath.FromSlash(name))
	}
	return os.ReadFile(name)
}

func (d folderFiles) Location() string { return string(d) }

// FolderVerifierKey returns the key set verifiers need (what VerifierKey
// returns) for the data folder dir, from its config and key files alone:
// the database is not opened, so a damaged folder (the moment an operator
// needs the key to check what was published) still answers. A postgres://
// location is opened read-only as usual.
func FolderVerifierKey(dir string, opts Options) (string, error) {
	if storage.IsURL(dir) {
		opts.ReadOnly = true
		l, err := Open(dir, opts)
		if err != nil {
			return "", err
		}
		defer l.Close()
		return l.VerifierKey(), nil
	}
	opts.defaults()
	fs := folderFiles(dir)
	cfg, err := readConfig(fs)
	if err != nil {
		return "", err
	}
	kr, err := cfg.keyring(fs, opts.Passphrase)
	if err != nil {
		return "", err
	}
	k := signingKeys{origin: cfg.Origin, kr: kr}
	if err := k.load(); err != nil {
		return "", err
	}
	return k.vkey, nil
}
