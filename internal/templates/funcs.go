package templates

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"
)

// FuncNames lists the functions templates may call besides the text/template
// builtins (and, or, not, len, index, slice, eq, ne, lt, le, gt, ge, print,
// println, html, js, urlquery — printf is restricted and call is disabled):
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

// budgetFunc is the hidden function appended to every {{range}} pipeline.
const budgetFunc = "_herald_range_budget"

// Errors returned (wrapped) by rendering.
var (
	// ErrRenderBudget: the template's {{range}} loops exceed MaxRangeIterations.
	ErrRenderBudget = errors.New("template loops exceed the render iteration budget")
	// ErrOutputTooLarge: a rendered field exceeds MaxRenderedFieldBytes.
	ErrOutputTooLarge = errors.New("rendered output exceeds the size limit")
	// ErrFuncNotAllowed: the template calls a disabled builtin (call).
	ErrFuncNotAllowed = errors.New("function not allowed in templates")
	// ErrPrintfFormat: printf was given a width/precision that is too large or '*'.
	ErrPrintfFormat = errors.New("printf format not allowed")
)

// maxPrintfWidth caps printf widths and precisions ("%0999999999d" would
// allocate a gigabyte).
const maxPrintfWidth = 64

// budget is the per-Render iteration budget shared by all fields.
type budget struct{ left int }

// charge deducts the length of a range operand and passes it through.
func (b *budget) charge(v any) (any, error) {
	n := 0
	rv := reflect.ValueOf(v)
	for rv.IsValid() && (rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface) {
		rv = rv.Elem()
	}
	if rv.IsValid() {
		switch rv.Kind() {
		case reflect.Slice, reflect.Array, reflect.Map, reflect.Chan, reflect.String:
			n = rv.Len()
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			n = clampInt(rv.Int())
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			if rv.Uint() > uint64(MaxRangeIterations) {
				n = MaxRangeIterations + 1
			} else {
				n = int(rv.Uint())
			}
		}
	}
	// Charge at least one per range evaluation so an empty range inside a huge
	// loop still costs something.
	if n < 1 {
		n = 1
	}
	if n > b.left {
		b.left = 0
		return nil, fmt.Errorf("%w (%d)", ErrRenderBudget, MaxRangeIterations)
	}
	b.left -= n
	return v, nil
}

func clampInt(i int64) int {
	if i < 0 {
		return 0
	}
	if i > int64(MaxRangeIterations) {
		return MaxRangeIterations + 1
	}
	return int(i)
}

// funcMap returns the allow-listed functions, with the range budget b (nil
// while only validating syntax: the budget function then charges nothing).
func funcMap(b *budget) map[string]any {
	if b == nil {
		b = &budget{left: MaxRangeIterations}
	}
	return map[string]any{
		"upper":    func(v any) string { return strings.ToUpper(toString(v)) },
		"lower":    func(v any) string { return strings.ToLower(toString(v)) },
		"title":    func(v any) string { return cases.Title(language.Und).String(toString(v)) },
		"trim":     func(v any) string { return strings.TrimSpace(toString(v)) },
		"default":  defaultFunc,
		"truncate": truncate,
		"join":     join,
		"date":     func(layout string, v any) (string, error) { return formatDate("", layout, v) },
		"dateIn":   formatDate,
		// Builtin overrides: user functions take precedence over builtins.
		"printf": safePrintf,
		"call": func(...any) (string, error) {
			return "", fmt.Errorf("%w: call", ErrFuncNotAllowed)
		},
		budgetFunc: b.charge,
	}
}

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

func truncate(n int, v any) string {
	s := toString(v)
	if n <= 0 {
		return ""
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	runes := []rune(s)
	return string(runes[:n-1]) + "…"
}

func join(sep string, v any) (string, error) {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() {
		return "", nil
	}
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		parts := make([]string, rv.Len())
		for i := range parts {
			parts[i] = toString(rv.Index(i).Interface())
		}
		return strings.Join(parts, sep), nil
	case reflect.String:
		return rv.String(), nil
	case reflect.Map:
		// Deterministic: join the values in key order.
		keys := rv.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = toString(rv.MapIndex(k).Interface())
		}
		return strings.Join(parts, sep), nil
	}
	return "", fmt.Errorf("join: cannot join a %T", v)
}

// formatDate formats v (an RFC 3339 timestamp string, or a time.Time) with Go
// layout; tz, when non-empty, is an IANA zone to convert to first.
func formatDate(tz, layout string, v any) (string, error) {
	var t time.Time
	switch x := v.(type) {
	case time.Time:
		t = x
	case string:
		var err error
		t, err = time.Parse(time.RFC3339Nano, x)
		if err != nil {
			if t, err = time.Parse("2006-01-02", x); err != nil {
				return "", fmt.Errorf("date: %q is not an RFC 3339 timestamp or a YYYY-MM-DD date", x)
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
			return "", fmt.Errorf("dateIn: unknown time zone %q", tz)
		}
		t = t.In(loc)
	}
	if len(layout) > 64 {
		return "", errors.New("date: layout too long")
	}
	return t.Format(layout), nil
}

// safePrintf is fmt.Sprintf refusing '*' widths and explicit widths or
// precisions above maxPrintfWidth.
func safePrintf(format string, args ...any) (string, error) {
	if err := checkPrintfFormat(format); err != nil {
		return "", err
	}
	return fmt.Sprintf(format, args...), nil
}

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
