package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/herald-notify/herald/internal/templates"
)

// decodeData reads a request's template data (POST /v1/notifications, the
// template preview) and refuses, with 400 invalid_field naming the path
// (data.order.items[2].sku, data["a b"]), what Herald cannot carry to a
// delivery exactly:
//
//   - a string or key with a NUL character, invalid UTF-8 or an unpaired UTF-16
//     surrogate escape (\ud800): PostgreSQL text cannot hold the first two (the
//     inbox insert failed and was retried for a day), and encoding/json would
//     silently turn the last two into U+FFFD, so what the client sent is not
//     what would be delivered;
//   - a number templates would not render exactly (templates.CheckNumber): out
//     of float64's range (1e999, which Temporal could not even decode) or with
//     more precision than a float64 holds. Integers keep every digit.
//
// Numbers stay json.Number (templates.Data), so the preview and the delivery
// render from the same text. Absent or null data is an empty object; anything
// but an object is 400 invalid_type.
//
// The walk uses json.Decoder's tokens, with their input offsets, because the
// decoded strings no longer show invalid UTF-8 (encoding/json replaces it), so
// the raw literal is examined when a string contains U+FFFD.
func decodeData(raw json.RawMessage) (templates.Data, *httpError) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return templates.Data{}, nil
	}
	if trimmed[0] != '{' {
		return nil, badField("data", "invalid_type", "data must be an object, not %s", jsonKind(trimmed[0]))
	}
	d := dataDecoder{raw: raw, dec: json.NewDecoder(bytes.NewReader(raw)), numbers: true}
	d.dec.UseNumber()
	v, err := d.value("data")
	if err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}

type dataDecoder struct {
	raw []byte
	dec *json.Decoder
	// numbers: refuse numbers templates would not render exactly.
	numbers bool
}

// checkBodyText refuses, with 400 invalid_field naming the field (name,
// in_app.body, categories["a b"]), a request body string or key that no
// PostgreSQL text column can hold or that encoding/json would silently alter: a
// NUL character, invalid UTF-8, an unpaired surrogate escape. decodeJSON applies
// it to every body, so such input is a clear 400 rather than a 500 from the
// database (a user's name, a template's content) or a stuck delivery. Bodies
// without a \u escape and with valid UTF-8, nearly all of them, are not walked.
func checkBodyText(raw []byte) *httpError {
	if utf8.Valid(raw) && !bytes.Contains(raw, []byte(`\u`)) {
		return nil
	}
	d := dataDecoder{raw: raw, dec: json.NewDecoder(bytes.NewReader(raw))}
	d.dec.UseNumber()
	_, err := d.value("")
	return err
}

// malformedData cannot happen for a body the request decoder accepted (a
// json.RawMessage is valid JSON); it is answered rather than trusted.
var malformedData = &httpError{Status: http.StatusBadRequest, Code: "malformed_json", Field: "data", Message: "data is not valid JSON"}

func (d *dataDecoder) value(path string) (any, *httpError) {
	start := d.dec.InputOffset()
	tok, err := d.dec.Token()
	if err != nil {
		return nil, malformedData
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			m := map[string]any{}
			for d.dec.More() {
				kstart := d.dec.InputOffset()
				ktok, err := d.dec.Token()
				k, ok := ktok.(string)
				if err != nil || !ok {
					return nil, malformedData
				}
				kpath := path + pathKey(k)
				if path == "" {
					kpath = strings.TrimPrefix(kpath, ".")
				}
				if e := d.checkString(kpath, "key", k, kstart); e != nil {
					return nil, e
				}
				v, e := d.value(kpath)
				if e != nil {
					return nil, e
				}
				m[k] = v
			}
			if _, err := d.dec.Token(); err != nil {
				return nil, malformedData
			}
			return m, nil
		case '[':
			a := []any{}
			for i := 0; d.dec.More(); i++ {
				v, e := d.value(path + "[" + itoa(i) + "]")
				if e != nil {
					return nil, e
				}
				a = append(a, v)
			}
			if _, err := d.dec.Token(); err != nil {
				return nil, malformedData
			}
			return a, nil
		}
		return nil, malformedData
	case string:
		if e := d.checkString(path, "string", t, start); e != nil {
			return nil, e
		}
		return t, nil
	case json.Number:
		if !d.numbers {
			return t, nil
		}
		if err := templates.CheckNumber(t); err != nil {
			return nil, badField(path, "invalid_field", "%s: %v", path, err)
		}
		return t, nil
	default: // true, false, null
		return t, nil
	}
}

// checkString refuses a key or string value that a delivery cannot carry as
// sent. start is the decoder offset before the token, so raw[start:] begins
// with the separators and then the string's literal.
func (d *dataDecoder) checkString(path, what, s string, start int64) *httpError {
	if strings.IndexByte(s, 0) >= 0 {
		return badField(path, "invalid_field", "%s: the %s contains a NUL character (\\u0000), which no channel can carry", path, what)
	}
	if !strings.ContainsRune(s, utf8.RuneError) {
		return nil
	}
	// encoding/json turned invalid UTF-8 and unpaired surrogates into U+FFFD:
	// look at what was sent.
	end := d.dec.InputOffset()
	lit := d.raw[start:end]
	if i := bytes.IndexByte(lit, '"'); i >= 0 {
		lit = lit[i:]
	}
	if !utf8.Valid(lit) {
		return badField(path, "invalid_field", "%s: the %s is not valid UTF-8", path, what)
	}
	if hasLoneSurrogate(lit) {
		return badField(path, "invalid_field", "%s: the %s contains an unpaired UTF-16 surrogate escape (\\ud800-\\udfff), which is not a character", path, what)
	}
	return nil // a U+FFFD the client sent as such
}

// hasLoneSurrogate reports a \uXXXX escape in a JSON string literal that is a
// surrogate not paired as high (\ud800-\udbff) then low (\udc00-\udfff).
func hasLoneSurrogate(lit []byte) bool {
	for i := 0; i < len(lit); i++ {
		if lit[i] != '\\' || i+1 >= len(lit) {
			continue
		}
		if lit[i+1] != 'u' {
			i++ // \" \\ \/ \b ...: skip the escaped character
			continue
		}
		r, ok := hex4(lit, i+2)
		if !ok {
			return false
		}
		switch {
		case r >= 0xd800 && r <= 0xdbff:
			lo, ok := hex4(lit, i+8)
			if i+7 >= len(lit) || lit[i+6] != '\\' || lit[i+7] != 'u' || !ok || lo < 0xdc00 || lo > 0xdfff {
				return true
			}
			i += 11
		case r >= 0xdc00 && r <= 0xdfff:
			return true
		default:
			i += 5
		}
	}
	return false
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// pathKey is one object key in an error's field path: .name for a key a
// template can address with a dot, otherwise ["the key"] as a JSON string.
func pathKey(k string) string {
	simple := k != ""
	for i, r := range k {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			simple = false
			break
		}
	}
	if simple {
		return "." + k
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(k) // a string always encodes
	return "[" + strings.TrimSuffix(b.String(), "\n") + "]"
}

func jsonKind(first byte) string {
	switch first {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	default:
		return "a number"
	}
}
