package templates

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Data is a notification's template data on its way from the API through the
// notification workflow to the Render activity: a JSON object whose numbers are
// json.Number, the exact text the client sent.
//
// Why a type of its own: Temporal carries workflow and activity inputs as JSON,
// and encoding/json decodes a number inside a map[string]any as a float64. That
// loses every integer digit past 2^53 (9007199254740993 arrives as
// 9007199254740992, while the preview, which renders the request's own
// json.Number, shows it exactly), and a number beyond float64's range (1e999)
// makes the workflow's input undecodable, so the run never starts its work.
// Data decodes with UseNumber, so the worker renders from the same text the API
// validated and previewed; json.Number encodes back as that text.
type Data map[string]any

// UnmarshalJSON decodes a JSON object (or null) keeping numbers as json.Number.
func (d *Data) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return err
	}
	*d = m
	return nil
}

// ErrInexactNumber: a data number that templates cannot render exactly.
var ErrInexactNumber = errors.New("number cannot be rendered exactly")

// ErrInvalidText: a string that contains a NUL character or is not valid UTF-8.
// No channel can carry it: PostgreSQL text (the inbox, the deliveries table)
// refuses both, and providers mangle them.
var ErrInvalidText = errors.New("text contains a NUL character or invalid UTF-8")

// CheckNumber reports whether templates render the JSON number n exactly (see
// Render for how numbers are normalised), so the API can refuse, at submit time,
// what would otherwise be delivered rounded:
//
//   - an integer literal (no fraction, no exponent) is always exact: an int64,
//     or beyond int64 its decimal digits as a string;
//   - any other number is a float64, which must hold its value exactly: the
//     shortest decimal that identifies the float must equal the number as
//     written (0.1, 19.90, 1e3 and 0.30000000000000004 qualify;
//     0.1000000000000000055511 and 123456789012345678901.5 do not, nor do 1e999,
//     out of range, and 1e-400, which would become 0).
//
// The error wraps ErrInexactNumber and says what the number would become.
func CheckNumber(n json.Number) error {
	s := string(n)
	if isIntegerLiteral(s) {
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			return fmt.Errorf("%w: %s is beyond the range of a 64-bit float (about ±1.8e308)", ErrInexactNumber, s)
		}
		return fmt.Errorf("%w: %s is not a JSON number", ErrInexactNumber, s)
	}
	if !sameDecimal(s, strconv.FormatFloat(f, 'e', -1, 64)) {
		return fmt.Errorf("%w: %s has more precision than a 64-bit float holds and would render as %s; send it as a string to keep every digit",
			ErrInexactNumber, s, Float(f))
	}
	return nil
}

// CheckText reports whether s can be carried to every channel: no NUL
// character, valid UTF-8 (wraps ErrInvalidText).
func CheckText(s string) error {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return fmt.Errorf("%w: a NUL character (\\u0000) at byte %d", ErrInvalidText, i)
	}
	if !utf8.ValidString(s) {
		for i := 0; i < len(s); {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				return fmt.Errorf("%w: invalid UTF-8 at byte %d", ErrInvalidText, i)
			}
			i += size
		}
	}
	return nil
}

// Float is a JSON number with a fraction or an exponent as templates see it. It
// is a float64, so printf "%.2f", eq, lt and default treat it as a number, and it
// prints in plain decimal notation with the fewest digits that identify it
// (12345678.9, 1000, 0.00001), never fmt's exponent form (1.23456789e+07,
// 1e+03, 1e-05) that a bare float64 would print. Its String method is the only
// Go method a template can reach in its data; it has no side effects.
type Float float64

// String is the plain decimal form.
func (f Float) String() string { return strconv.FormatFloat(float64(f), 'f', -1, 64) }

// numberValue is what templates see for a JSON number (see Render).
func numberValue(n json.Number) any {
	s := string(n)
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i
	}
	if isIntegerLiteral(s) {
		return s // an integer beyond int64: keep every digit
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return Float(f)
	}
	return s // beyond float64 (the API refuses these): keep the text
}

// isIntegerLiteral reports -?[0-9]+.
func isIntegerLiteral(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// sameDecimal reports whether two JSON number literals denote the same decimal
// value, by comparing sign, significant digits and decimal exponent (no big
// arithmetic, so a huge exponent costs nothing).
func sameDecimal(a, b string) bool {
	na, da, ea, oka := decimalParts(a)
	nb, db, eb, okb := decimalParts(b)
	if !oka || !okb {
		return false
	}
	if da == "" || db == "" { // zero, whatever its sign
		return da == db
	}
	return na == nb && da == db && ea == eb
}

// decimalParts splits a JSON number literal into its sign, its significant
// digits (no leading or trailing zeros; "" for zero) and the exponent e with
// value = 0.digits × 10^e. ok is false for malformed input or an exponent too
// large to represent.
func decimalParts(s string) (neg bool, digits string, exp int, ok bool) {
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	}
	mant, expPart := s, ""
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, expPart = s[:i], s[i+1:]
	}
	intPart, frac := mant, ""
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		intPart, frac = mant[:i], mant[i+1:]
	}
	if intPart == "" || !isIntegerLiteral(intPart) || (frac != "" && !isIntegerLiteral(frac)) {
		return false, "", 0, false
	}
	all := intPart + frac
	lead := len(all) - len(strings.TrimLeft(all, "0"))
	digits = strings.TrimRight(all[lead:], "0")
	if digits == "" {
		return neg, "", 0, true
	}
	e := 0
	if expPart != "" {
		v, err := strconv.Atoi(expPart)
		if err != nil || v > 1<<40 || v < -(1<<40) {
			return false, "", 0, false
		}
		e = v
	}
	return neg, digits, len(intPart) - lead + e, true
}
