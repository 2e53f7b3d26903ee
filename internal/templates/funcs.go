package templates

import (
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"sort"
	"strings"
	texttemplate "text/template"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"
)

// FuncNames lists the functions templates may call besides the text/template
// builtins (and, or, not, len, index, slice, eq, ne, lt, le, gt, ge, print,
// println, html, js, urlquery — printf is restricted, call is disabled, and
// the builtins that build strings are replaced by budgeted equivalents, see
// funcMap):
//
//	upper S            upper-case
//	lower S            lower-case
//	title S            title-case (Unicode-aware)
//	trim S             strip leading and trailing white space
//	default D V        V, or D when V is empty ("", 0, false, nil, empty list/map)
//	truncate N S       S cut to at most N runes, ending in "…" when cut
//	join SEP LIST      the list's elements joined with SEP
//	date LAYOUT V      V (an RFC 3339 string) formatted with Go layout LAYOUT,
//	                   in V's own UTC offset
//	dateIn TZ LAYOUT V the same, converted to IANA zone TZ first
//
// All of them are pipeline-friendly: {{.name | upper}}, {{.when | date "2 Jan 2006"}}.
// Optional variables are read with index, which does not fail on a missing
// key: {{with index . "coupon"}}Use {{.}}{{end}}.
var FuncNames = []string{"upper", "lower", "title", "trim", "default", "truncate", "join", "date", "dateIn"}

// maxPrintfWidth caps printf widths and precisions ("%0999999999d" would
// allocate a gigabyte).
const maxPrintfWidth = 64

// funcMap returns the allow-listed functions charging budget b (nil while only
// parsing: the functions then charge a budget of their own).
//
// Every builtin that builds a string (print, printf, println, html, js,
// urlquery) is replaced by a version that charges b: it refuses, before
// building, a result that cannot fit (the per-call cap MaxBuiltStringBytes and
// what is left of MaxBuiltBytes), and charges what it built. The builtins that
// only read (eq, ne, lt, le, gt, ge, index, slice, len, and, or, not) keep
// text/template's semantics; the instrumentation charges their operands (see
// instrument).
func funcMap(b *budget) map[string]any {
	if b == nil {
		b = newBudget()
	}
	return funcMapOf(&budgetRef{b: b})
}

// budgetRef is the budget a set of functions charges, swappable: a parsed field
// kept for reuse (parsecache.go) is bound to its functions once, and each
// render points the ref at its own budget for the execution.
type budgetRef struct{ b *budget }

// funcMapOf is funcMap charging whatever budget r points at when called.
func funcMapOf(r *budgetRef) map[string]any {
	return map[string]any{
		"upper":    func(v any) (string, error) { return r.b.mapString(v, strings.ToUpper) },
		"lower":    func(v any) (string, error) { return r.b.mapString(v, strings.ToLower) },
		"title":    func(v any) (string, error) { return r.b.mapString(v, titleCase) },
		"trim":     func(v any) (string, error) { return r.b.trim(v) },
		"default":  defaultFunc,
		"truncate": func(n int, v any) (string, error) { return r.b.truncate(n, v) },
		"join":     func(sep string, v any) (string, error) { return r.b.join(sep, v) },
		"date": func(layout string, v any) (string, error) {
			return r.b.formatDate("", layout, v)
		},
		"dateIn": func(tz, layout string, v any) (string, error) { return r.b.formatDate(tz, layout, v) },
		// Builtin overrides: user functions take precedence over builtins.
		"print":   func(args ...any) (string, error) { return r.b.sprint(fmt.Sprint, args) },
		"println": func(args ...any) (string, error) { return r.b.sprint(fmt.Sprintln, args) },
		"printf":  func(format string, args ...any) (string, error) { return r.b.printf(format, args...) },
		"html": func(args ...any) (string, error) {
			return r.b.escape(args, htmlEscapedLen, texttemplate.HTMLEscapeString)
		},
		"js": func(args ...any) (string, error) {
			return r.b.escape(args, jsEscapedLen, texttemplate.JSEscapeString)
		},
		"urlquery": func(args ...any) (string, error) {
			return r.b.escape(args, queryEscapedLen, url.QueryEscape)
		},
		"call": func(...any) (string, error) {
			return "", fmt.Errorf("%w: call", ErrFuncNotAllowed)
		},
		rangeFunc: func(cost int, v any) (any, error) { return r.b.rangeCharge(cost, v) },
		readFunc:  func(v any) (any, error) { return r.b.readValue(v) },
	}
}

// text charges reading v and returns it as a string (fmt's form for
// non-strings, within the build budget).
func (b *budget) text(v any) (string, error) {
	if s, ok := v.(string); ok {
		return s, b.charge(len(s))
	}
	n := sizeOf(v, MaxBuiltStringBytes+1)
	if err := b.charge(n); err != nil {
		return "", err
	}
	if err := b.reserve(n); err != nil {
		return "", err
	}
	s := toString(v)
	return s, b.build(len(s))
}

// mapString applies f (upper, lower, title) to v within the budget.
func (b *budget) mapString(v any, f func(string) string) (string, error) {
	s, err := b.text(v)
	if err != nil {
		return "", err
	}
	if err := b.reserve(len(s)); err != nil {
		return "", err
	}
	out := f(s)
	return out, b.build(len(out))
}

// sprint is print (fmt.Sprint) or println (fmt.Sprintln) within the budget.
func (b *budget) sprint(f func(...any) string, args []any) (string, error) {
	n := argsSize(args, MaxBuiltStringBytes+1)
	if err := b.charge(n); err != nil {
		return "", err
	}
	if err := b.reserve(n - len(args)); err != nil {
		return "", err
	}
	s := f(args...)
	return s, b.build(len(s))
}

// printf is fmt.Sprintf refusing '*' widths and explicit widths or precisions
// above maxPrintfWidth, within the budget.
func (b *budget) printf(format string, args ...any) (string, error) {
	if err := checkPrintfFormat(format); err != nil {
		return "", err
	}
	n := len(format) + argsSize(args, MaxBuiltStringBytes+1)
	if err := b.charge(n); err != nil {
		return "", err
	}
	if err := b.reserve(n - len(args) - len(format)); err != nil {
		return "", err
	}
	s := fmt.Sprintf(format, args...)
	return s, b.build(len(s))
}

// escape is html, js or urlquery: the arguments as text/template's escapers
// read them (one string as is, anything else through fmt.Sprint), escaped
// with esc once escapedLen, the exact length of the result, fits.
func (b *budget) escape(args []any, escapedLen func(string) int, esc func(string) string) (string, error) {
	var s string
	one := false
	if len(args) == 1 {
		s, one = args[0].(string)
	}
	if one {
		if err := b.charge(len(s)); err != nil {
			return "", err
		}
	} else {
		var err error
		if s, err = b.sprint(fmt.Sprint, args); err != nil {
			return "", err
		}
	}
	if err := b.reserve(escapedLen(s)); err != nil {
		return "", err
	}
	out := esc(s)
	return out, b.build(len(out))
}

// htmlEscapedLen is len(texttemplate.HTMLEscapeString(s)).
func htmlEscapedLen(s string) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case 0:
			n += 2 // \uFFFD
		case '"', '\'', '&':
			n += 4 // &#34; &#39; &amp;
		case '<', '>':
			n += 3 // &lt; &gt;
		}
	}
	return n
}

// jsEscapedLen is len(texttemplate.JSEscapeString(s)).
func jsEscapedLen(s string) int {
	n := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '\\' || c == '\'' || c == '"':
				n += 2
			case c == '<' || c == '>' || c == '&' || c == '=' || c < ' ':
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case unicode.IsPrint(r):
			n += size
		case r > 0xFFFF:
			n += 2 + len(fmt.Sprintf("%X", r)) // \u10FFFF
		default:
			n += 6 // \uXXXX
		}
		i += size
	}
	return n
}

// queryEscapedLen is len(url.QueryEscape(s)).
func queryEscapedLen(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '-', c == '_', c == '.', c == '~', c == ' ':
			n++
		default:
			n += 3
		}
	}
	return n
}

// titleCase title-cases s (a Caser is not safe for concurrent use: one per call).
func titleCase(s string) string { return cases.Title(language.Und).String(s) }

func toString(v any) string {
	switch s := v.(type) {
	case nil:
		return ""
	case string:
		return s
	}
	return fmt.Sprint(v)
}

func defaultFunc(def, v any) any {
	if isEmpty(v) {
		return def
	}
	return v
}

func isEmpty(v any) bool {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() {
		return true
	}
	switch rv.Kind() {
	case reflect.Slice, reflect.Map, reflect.Array, reflect.String:
		return rv.Len() == 0
	case reflect.Bool:
		return !rv.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return rv.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return rv.Float() == 0
	case reflect.Pointer, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

// trim strips leading and trailing white space (a substring: nothing built).
func (b *budget) trim(v any) (string, error) {
	s, err := b.text(v)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(s), nil
}

// truncate cuts v to at most n runes, ending in "…" when cut. It reads at most
// the first n runes, whatever n and however long v.
func (b *budget) truncate(n int, v any) (string, error) {
	s, err := b.text(v)
	if err != nil {
		return "", err
	}
	if n <= 0 {
		return "", nil
	}
	cut, i := 0, 0 // cut: the byte offset after n-1 runes
	for runes := 0; i < len(s); runes++ {
		if runes == n-1 {
			cut = i
		}
		if runes == n {
			// More than n runes: n-1 of them and the ellipsis.
			out := s[:cut] + "…"
			return out, b.build(len(out))
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s, nil
}

// join joins the list's elements (a map's values in key order) with sep.
func (b *budget) join(sep string, v any) (string, error) {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() {
		return "", nil
	}
	var parts []string
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		parts = make([]string, rv.Len())
		for i := range parts {
			s, err := b.text(rv.Index(i).Interface())
			if err != nil {
				return "", err
			}
			parts[i] = s
		}
	case reflect.String:
		return rv.String(), nil
	case reflect.Map:
		// Deterministic: join the values in key order.
		keys := rv.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
		parts = make([]string, len(keys))
		for i, k := range keys {
			s, err := b.text(rv.MapIndex(k).Interface())
			if err != nil {
				return "", err
			}
			parts[i] = s
		}
	default:
		return "", fmt.Errorf("join: cannot join a %T", v)
	}
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if len(parts) > 1 {
		// Charge the separator's reads too: one long separator joining a long
		// list is the way join multiplies text.
		if err := b.charge(len(sep)); err != nil {
			return "", err
		}
		if len(sep) > 0 && len(parts)-1 > (MaxBuiltStringBytes+1)/len(sep) {
			return "", b.reserve(MaxBuiltStringBytes + 1)
		}
		n += (len(parts) - 1) * len(sep)
	}
	if err := b.reserve(n); err != nil {
		return "", err
	}
	out := strings.Join(parts, sep)
	return out, b.build(len(out))
}

// formatDate formats v (an RFC 3339 timestamp string, or a time.Time) with Go
// layout; tz, when non-empty, is an IANA zone to convert to first.
func (b *budget) formatDate(tz, layout string, v any) (string, error) {
	var t time.Time
	switch x := v.(type) {
	case time.Time:
		t = x
	case string:
		if err := b.charge(len(x)); err != nil {
			return "", err
		}
		var err error
		t, err = time.Parse(time.RFC3339Nano, x)
		if err != nil {
			if t, err = time.Parse("2006-01-02", x); err != nil {
				return "", fmt.Errorf("date: %q is not an RFC 3339 timestamp or a YYYY-MM-DD date", clip(x))
			}
		}
	default:
		return "", fmt.Errorf("date: cannot format a %T", v)
	}
	if tz != "" {
		if tz == "Local" {
			return "", fmt.Errorf("dateIn: time zone %q not allowed", tz)
		}
		loc, err := time.LoadLocation(tz)
		if err != nil {
			return "", fmt.Errorf("dateIn: unknown time zone %q", clip(tz))
		}
		t = t.In(loc)
	}
	if len(layout) > 64 {
		return "", errors.New("date: layout too long")
	}
	out := t.Format(layout)
	return out, b.build(len(out))
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	return s[:64] + "…"
}

// checkPrintfFormat refuses '*' widths and explicit widths or precisions
// above maxPrintfWidth.
func checkPrintfFormat(f string) error {
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			continue
		}
		i++
		// flags, argument indexes, widths and precisions up to the verb
		num := 0
		for ; i < len(f); i++ {
			c := f[i]
			switch {
			case c == '*':
				return fmt.Errorf("%w: '*' width", ErrPrintfFormat)
			case c >= '0' && c <= '9':
				num = num*10 + int(c-'0')
				if num > maxPrintfWidth {
					return fmt.Errorf("%w: width or precision above %d", ErrPrintfFormat, maxPrintfWidth)
				}
				continue
			case c == '+' || c == '-' || c == '#' || c == ' ' || c == '.' || c == '[' || c == ']':
				num = 0
				continue
			}
			break // the verb (or "%%")
		}
	}
	return nil
}
