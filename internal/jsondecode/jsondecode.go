// Package jsondecode names what is wrong with a JSON document by field, the way
// the API reports it ({"code": "unknown_field", "field": "settings.form", ...}).
// The API uses it for request bodies and the providers for the settings and
// credentials objects nested in a provider config, so both word their errors
// the same.
package jsondecode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Error is one problem with a JSON document: Code is malformed_json,
// invalid_type, unknown_field (or, from callers, missing_field, invalid_field…),
// Field the dotted path of the offending field ("" for the whole document).
type Error struct {
	Field   string
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Message }

// Field builds an Error for a field.
func Field(field, code, format string, args ...any) *Error {
	return &Error{Field: field, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Explain turns an encoding/json decoding error into an Error.
func Explain(err error) *Error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return &Error{Code: "malformed_json", Message: fmt.Sprintf("malformed JSON at byte %d: %v", syntax.Offset, syntax)}
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return &Error{Code: "malformed_json", Message: "request body must be a JSON object"}
		}
		return Field(field, "invalid_type", "%s must be %s, not %s", field, typeName(typ.Type.Kind().String()), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &Error{Code: "malformed_json", Message: "malformed JSON: unexpected end of input"}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return Field(name, "unknown_field", "unknown field %q", name)
	default:
		return &Error{Code: "malformed_json", Message: "malformed JSON: " + err.Error()}
	}
}

func typeName(kind string) string {
	switch kind {
	case "string", "ptr":
		return "a string"
	case "int", "int64", "int32", "uint", "uint64":
		return "an integer"
	case "slice":
		return "an array"
	case "map", "struct":
		return "an object"
	case "bool":
		return "a boolean"
	default:
		return "a " + kind
	}
}

// IsObject reports whether raw is (starts as) a JSON object.
func IsObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{'
}

// Object strictly decodes raw, the object field called name, into dst (unknown
// keys rejected), naming errors by their full path ("settings.from").
func Object(raw json.RawMessage, name string, dst any) *Error {
	if !IsObject(raw) {
		return Field(name, "invalid_type", "%s must be an object", name)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		e := Explain(err)
		switch e.Code {
		case "unknown_field":
			e.Message = fmt.Sprintf("unknown field %q in %s", e.Field, name)
			e.Field = name + "." + e.Field
		case "invalid_type":
			e.Field = name + "." + e.Field
			e.Message = name + "." + e.Message
		default:
			e.Field = name
		}
		return e
	}
	return nil
}

// OnlySpaceLeft reports whether nothing but JSON whitespace follows, in raw,
// the value dec has just decoded from it. (dec.More is false before a '}' or
// ']', so it lets `{"name":"x"}}` and `{"name":"x"}]junk` through.)
func OnlySpaceLeft(dec *json.Decoder, raw []byte) bool {
	off := dec.InputOffset()
	return off <= int64(len(raw)) && len(bytes.TrimLeft(raw[off:], " \t\r\n")) == 0
}
