package sendgrid

import (
	"encoding/json"
	"errors"
)

// ErrNotEventArray: a webhook body that is not a JSON array (of events).
var ErrNotEventArray = errors.New("sendgrid webhook: body is not a JSON array of events")

// Batch is what ScanBatch learns about an Event Webhook body without decoding it.
type Batch struct {
	// Events counts the delivery events (the events ParseEvents turns into
	// receipts).
	Events int
	// Tenants are the distinct `tenant` custom args (JSON strings) of those
	// events and of the events that only suppress an address (spamreport,
	// unsubscribe), in order of appearance; scanning stops collecting at two.
	Tenants []string

	raws [][]byte // the raw JSON string contents of Tenants
}

// tracked reports whether ParseEvents turns an event of this name into a receipt.
func tracked(event []byte) bool {
	switch string(event) {
	case "processed", "deferred", "delivered", "open", "click", "bounce", "dropped":
		return true
	}
	return false
}

// suppressing reports whether an event that is not a receipt puts its address
// on the suppression list (ParseBatch); the tenant it names counts too.
func suppressing(event []byte) bool {
	switch string(event) {
	case "spamreport", "unsubscribe":
		return true
	}
	return false
}

// maxTenantArg bounds a tenant custom arg ScanBatch keeps (tenant ids are short).
const maxTenantArg = 256

// ScanBatch reads an unverified Event Webhook body in one pass with no
// allocation besides the tenants it returns: how many delivery events it holds
// and which tenants they name (each event's top-level `tenant` string, the
// last one when repeated, as json.Unmarshal reads it). A handler that must
// learn from the body whose key verifies it calls ScanBatch, verifies, and
// only then decodes with ParseEvents, so a forged body costs a scan, not a
// decode (decoding 2 MiB of tiny events allocates hundreds of MiB).
//
// The body must be valid JSON (json.Valid, which allocates nothing per byte)
// and an array of objects, or the error is ErrNotEventArray. Keys and values written
// with escapes ("\u0074enant") are not recognised; since ParseEvents would
// read them, callers compare its receipts with the scan after verifying.
func ScanBatch(body []byte) (Batch, error) {
	var b Batch
	i := skipSpace(body, 0)
	if !json.Valid(body) || i >= len(body) || body[i] != '[' {
		return b, ErrNotEventArray
	}
	depth := 0
	// The top-level object being read: its "event" and "tenant" values (the
	// last of each), as offsets into body.
	var event, tenant []byte
	var hasTenant bool
	for i < len(body) {
		c := body[i]
		if depth == 1 && c != '{' && c != ']' && c != ',' && c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return Batch{}, ErrNotEventArray // an element that is not an object
		}
		switch c {
		case '[', '{':
			depth++
			if depth == 2 && c == '{' {
				event, tenant, hasTenant = nil, nil, false
			}
			i++
		case ']', '}':
			if depth == 2 && c == '}' {
				if tracked(event) {
					b.Events++
				}
				if hasTenant && (tracked(event) || suppressing(event)) {
					b.addTenant(tenant)
				}
			}
			depth--
			i++
		case '"':
			end := stringEnd(body, i)
			j := skipSpace(body, end)
			if depth == 2 && j < len(body) && body[j] == ':' {
				// A key of a top-level object: look at its value.
				key := body[i+1 : end-1]
				k := skipSpace(body, j+1)
				if k < len(body) && body[k] == '"' {
					vend := stringEnd(body, k)
					val := body[k+1 : vend-1]
					switch string(key) {
					case "event":
						event = val
					case "tenant":
						tenant, hasTenant = val, true
					}
					i = vend
					continue
				}
				switch string(key) {
				case "event":
					event = nil
				case "tenant":
					tenant, hasTenant = nil, false // not a string: no tenant
				}
			}
			i = end
		default:
			i++
		}
	}
	return b, nil
}

// addTenant records a tenant string (raw JSON string contents) if new.
func (b *Batch) addTenant(raw []byte) {
	if len(b.Tenants) >= 2 || len(raw) == 0 || len(raw) > maxTenantArg {
		return
	}
	for _, r := range b.raws {
		if string(r) == string(raw) {
			return
		}
	}
	var s string
	if json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &s) != nil || s == "" {
		return
	}
	for _, t := range b.Tenants {
		if t == s {
			return
		}
	}
	b.Tenants = append(b.Tenants, s)
	b.raws = append(b.raws, raw)
}

// stringEnd is the offset just after the JSON string starting at body[i] ('"').
func stringEnd(body []byte, i int) int {
	for j := i + 1; j < len(body); j++ {
		switch body[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(body)
}

func skipSpace(body []byte, i int) int {
	for i < len(body) {
		switch body[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}
