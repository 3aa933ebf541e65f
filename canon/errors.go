package canon

import "fmt"

// Codes carried by *Error. They are the reason codes of DESIGN §4 step 3.
const (
	CodeNonCanonical  = "non_canonical"
	CodeSchemaInvalid = "schema_invalid"
)

// Error is a failure to read or write canonical JSON.
type Error struct {
	Path string // where in the document, e.g. "scope.targets[1]"; "" for the root
	Code string // CodeNonCanonical or CodeSchemaInvalid
	Msg  string // what rule was broken, with the offending value
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

func nonCanonical(path, format string, args ...any) *Error {
	return &Error{Path: path, Code: CodeNonCanonical, Msg: fmt.Sprintf(format, args...)}
}

func schemaInvalid(path, format string, args ...any) *Error {
	return &Error{Path: path, Code: CodeSchemaInvalid, Msg: fmt.Sprintf(format, args...)}
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func indexPath(path string, i int) string {
	return fmt.Sprintf("%s[%d]", path, i)
}
