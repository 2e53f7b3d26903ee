package api

import (
	"encoding/json"
	"strings"
)

// The common import line — a flat object of the profile's string fields,
// topics as an array of plain strings, preferences as an object — is decoded
// here without reflection, a third of encoding/json's cost. Anything else (an
// escape in a string, a key spelt another way, a number where a string goes,
// push_tokens, a syntax error) is left to encoding/json, which decodes the line
// as before and names what is wrong: the fast path only ever accepts lines that
// encoding/json decodes to the same values.

// importFast is what the fast path decoded from one line. The strings are
// slices of one copy of the line: what outlives the line (a cache key) must be
// copied, or it keeps the whole line alive.
type importFast struct {
	profile     [numProfileFields]string
	set         [numProfileFields]bool // the key was present with a string (not null)
	preferences []byte                 // the raw object; nil when absent or null
	topics      []string
	hasTopics   bool
}

// The profile fields of an import line, in importFast.profile's order.
const (
	fieldUserID = iota
	fieldName
	fieldEmail
	fieldPhone
	fieldLocale
	fieldTimezone
	numProfileFields
)

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipJSONSpace(s string, i int) int {
	for i < len(s) && isJSONSpace(s[i]) {
		i++
	}
	return i
}

// fastString reads the string starting at s[i] (a '"') and returns its
// content and the index after its closing quote; ok is false for anything but
// a string without escapes or control characters.
func fastString(s string, i int) (string, int, bool) {
	if i >= len(s) || s[i] != '"' {
		return "", i, false
	}
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '"':
			return s[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20:
			return "", i, false
		}
	}
	return "", i, false
}

// skipJSONObject returns the index after the object starting at s[i] (a '{'),
// or -1: it balances braces and brackets outside strings; json.Valid checks
// the span afterwards.
func skipJSONObject(s string, i int) int {
	depth := 0
	for ; i < len(s); i++ {
		switch s[i] {
		case '"':
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' {
					i++
				}
			}
			if i >= len(s) {
				return -1
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return -1
}

// decodeFast decodes line into f; false when the line is for encoding/json.
func decodeFast(line []byte, f *importFast) bool {
	// The topics' array is reused, cleared first: its old elements are
	// slices of earlier lines, which it would keep alive.
	clear(f.topics)
	*f = importFast{topics: f.topics[:0]}
	s := string(line)
	i := skipJSONSpace(s, 0)
	if i >= len(s) || s[i] != '{' {
		return false
	}
	i = skipJSONSpace(s, i+1)
	for {
		key, j, ok := fastString(s, i)
		if !ok {
			return false
		}
		i = skipJSONSpace(s, j)
		if i >= len(s) || s[i] != ':' {
			return false
		}
		i = skipJSONSpace(s, i+1)
		if i >= len(s) {
			return false
		}
		isNull := strings.HasPrefix(s[i:], "null")
		field := -1
		switch key {
		case "user_id":
			field = fieldUserID
		case "name":
			field = fieldName
		case "email":
			field = fieldEmail
		case "phone":
			field = fieldPhone
		case "locale":
			field = fieldLocale
		case "timezone":
			field = fieldTimezone
		case "topics":
			if isNull {
				f.topics, f.hasTopics = f.topics[:0], false
				i += len("null")
				break
			}
			if s[i] != '[' {
				return false
			}
			f.topics, f.hasTopics = f.topics[:0], true
			i = skipJSONSpace(s, i+1)
			if i < len(s) && s[i] == ']' {
				i++
				break
			}
			for {
				t, j, ok := fastString(s, i)
				if !ok {
					return false
				}
				f.topics = append(f.topics, t)
				i = skipJSONSpace(s, j)
				if i < len(s) && s[i] == ',' {
					i = skipJSONSpace(s, i+1)
					continue
				}
				if i < len(s) && s[i] == ']' {
					i++
					break
				}
				return false
			}
		case "preferences":
			if isNull {
				f.preferences = nil
				i += len("null")
				break
			}
			if s[i] != '{' {
				return false
			}
			end := skipJSONObject(s, i)
			if end < 0 || !json.Valid(line[i:end]) {
				return false
			}
			f.preferences = line[i:end]
			i = end
		default:
			return false
		}
		if field >= 0 {
			if isNull {
				f.profile[field], f.set[field] = "", false
				i += len("null")
			} else {
				v, j, ok := fastString(s, i)
				if !ok {
					return false
				}
				f.profile[field], f.set[field] = v, true
				i = j
			}
		}
		i = skipJSONSpace(s, i)
		if i < len(s) && s[i] == ',' {
			i = skipJSONSpace(s, i+1)
			continue
		}
		if i < len(s) && s[i] == '}' {
			return skipJSONSpace(s, i+1) == len(s) && f.set[fieldUserID]
		}
		return false
	}
}
