package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// modulePackages returns the folders, relative to the module root, that
// hold a Go package of this module: every folder with a .go file, except
// testdata, node_modules, hidden folders and folders of another module
// (a go.mod of their own, such as bench/peers/tessera).
func modulePackages(t *testing.T, root string) []string {
	t.Helper()
	var pkgs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		if path != root {
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
		}
		entries, err := os.ReadDir(path)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".go") {
				rel, err := filepath.Rel(root, path)
				if err != nil {
					return err
				}
				pkgs = append(pkgs, filepath.ToSlash(rel))
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// TestArchitectureListsEveryPackage holds docs/ARCHITECTURE.md's package
// table to the tree: every package of the module has a row, and every row
// names a package that exists.
func TestArchitectureListsEveryPackage(t *testing.T) {
	root := "../.."
	data, err := os.ReadFile(filepath.Join(root, "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "\n## Packages\n")
	if start < 0 {
		t.Fatal("docs/ARCHITECTURE.md: no section \"## Packages\"")
	}
	section := text[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\|")
	var listed []string
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		listed = append(listed, m[1])
	}
	if len(listed) == 0 {
		t.Fatal("docs/ARCHITECTURE.md: the Packages section has no table rows of the form | `path` | ...")
	}
	pkgs := modulePackages(t, root)
	for _, p := range pkgs {
		if !slices.Contains(listed, p) {
			t.Errorf("docs/ARCHITECTURE.md: package %s is missing from the table under \"## Packages\" (add a row: | `%s` | its job | what it imports |)", p, p)
		}
	}
	for _, p := range listed {
		if !slices.Contains(pkgs, p) {
			t.Errorf("docs/ARCHITECTURE.md: the table under \"## Packages\" lists %s, which is not a package of the module", p)
		}
	}
}
