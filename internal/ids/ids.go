// Package ids derives Herald's identifiers: the dedup key hash, the notification
// workflow ID (Layer-1 dedup: one open workflow per tenant + key), and the public
// notification_id, which encodes the workflow ID's key hash and the run ID so that a
// lookup never needs a side table and never races the workflow's first activity.
package ids

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// KeyHashLen is the dedup key hash length in bytes: 128 bits (the 32 hex digits of
// the workflow ID in docs/design.md, Layer 1), enough for billions of keys a day
// without collisions.
const KeyHashLen = 16

// NotificationIDPrefix starts every public notification id.
const NotificationIDPrefix = "n_"

// KeyHash is the truncated SHA-256 that identifies "the same notification" in a tenant.
type KeyHash [KeyHashLen]byte

func (k KeyHash) String() string { return hex.EncodeToString(k[:]) }

// IdempotencyKeyHash hashes a client-supplied idempotency key.
func IdempotencyKeyHash(key string) KeyHash {
	return truncate(sha256.Sum256([]byte("idem|" + key)))
}

// ContentKeyHash hashes user | template | canonical JSON of data, the content-derived
// key of docs/design.md (Layer 1): identical content submitted without a key dedups.
func ContentKeyHash(userID, templateID string, data map[string]any) (KeyHash, error) {
	canon, err := CanonicalJSON(data)
	if err != nil {
		return KeyHash{}, err
	}
	h := sha256.New()
	h.Write([]byte("content|"))
	h.Write([]byte(userID))
	h.Write([]byte{'|'})
	h.Write([]byte(templateID))
	h.Write([]byte{'|'})
	h.Write(canon)
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return truncate(sum), nil
}

func truncate(sum [32]byte) KeyHash {
	var k KeyHash
	copy(k[:], sum[:KeyHashLen])
	return k
}

// NotificationWorkflowID is the workflow ID for a tenant's dedup key. Starting a
// workflow with it is the dedup check.
func NotificationWorkflowID(tenantID string, key KeyHash) string {
	return "notification/" + tenantID + "/" + key.String()
}

// NotificationID is the public id of one run (one dedup window) of a notification
// workflow: n_ + hex(key hash) + hex(run UUID).
func NotificationID(key KeyHash, runID string) string {
	return NotificationIDPrefix + key.String() + strings.ReplaceAll(runID, "-", "")
}

// ErrMalformedNotificationID means the string cannot be a Herald notification id.
var ErrMalformedNotificationID = errors.New("malformed notification id")

// NotificationIDSize is a notification id's length in bytes: its key hash and
// its run UUID, as the database keeps it (internal/dbx).
const NotificationIDSize = KeyHashLen + 16

// NotificationIDBytes is the bytes a notification id spells; false when s is
// not one (the prefix, then 2 × NotificationIDSize lowercase hex digits).
func NotificationIDBytes(s string) ([]byte, bool) {
	rest, ok := strings.CutPrefix(s, NotificationIDPrefix)
	if !ok || len(rest) != 2*NotificationIDSize || strings.ToLower(rest) != rest {
		return nil, false
	}
	b, err := hex.DecodeString(rest)
	return b, err == nil
}

// NotificationIDFromBytes spells out the notification id of b
// (NotificationIDSize bytes, NotificationIDBytes' result).
func NotificationIDFromBytes(b []byte) string {
	return NotificationIDPrefix + hex.EncodeToString(b)
}

// ParseNotificationID splits a public id into its key hash and run ID.
func ParseNotificationID(id string) (KeyHash, string, error) {
	raw, ok := NotificationIDBytes(id)
	if !ok {
		return KeyHash{}, "", ErrMalformedNotificationID
	}
	var k KeyHash
	copy(k[:], raw[:KeyHashLen])
	r := hex.EncodeToString(raw[KeyHashLen:])
	runID := fmt.Sprintf("%s-%s-%s-%s-%s", r[0:8], r[8:12], r[12:16], r[16:20], r[20:32])
	return k, runID, nil
}

// RunIDTime is the time a UUIDv7 run id was made: its first 48 bits are Unix
// milliseconds. Temporal's run ids are UUIDv7 (server 1.29), made when the
// server starts the run. ok is false for a run id of any other version (and
// for the hash a campaign recipient's notification id holds instead).
func RunIDTime(runID string) (t time.Time, ok bool) {
	h := strings.ReplaceAll(runID, "-", "")
	if len(h) != 32 || h[12] != '7' || !strings.ContainsRune("89ab", rune(h[16])) {
		return time.Time{}, false
	}
	ms, err := strconv.ParseInt(h[:12], 16, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(ms).UTC(), true
}

// KeyHashFromWorkflowID recovers the key hash from a notification workflow ID.
func KeyHashFromWorkflowID(workflowID string) (KeyHash, error) {
	i := strings.LastIndexByte(workflowID, '/')
	raw, err := hex.DecodeString(workflowID[i+1:])
	if err != nil || len(raw) != KeyHashLen {
		return KeyHash{}, fmt.Errorf("not a notification workflow id: %q", workflowID)
	}
	var k KeyHash
	copy(k[:], raw)
	return k, nil
}

// CanonicalJSON encodes v with object keys sorted at every depth and no insignificant
// whitespace, so that logically equal payloads hash equally. Numbers keep their JSON
// text when v came from a json.Decoder with UseNumber.
func CanonicalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := writeCanonical(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeCanonical(buf *bytes.Buffer, v any) error {
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			buf.Write(kb)
			buf.WriteByte(':')
			if err := writeCanonical(buf, t[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeCanonical(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	default:
		b, err := json.Marshal(t)
		if err != nil {
			return err
		}
		buf.Write(b)
	}
	return nil
}

// CampaignWorkflowID is the workflow ID of a tenant's campaign (Layer 1 for
// campaigns: one campaign per tenant + campaign key).
func CampaignWorkflowID(tenantID, campaignID string) string {
	return "campaign/" + tenantID + "/" + campaignID
}

// CampaignIDPrefix starts every campaign id Herald derives from an
// idempotency key.
const CampaignIDPrefix = "cmp_"

// CampaignIDFromKey derives a campaign id from a client's idempotency key.
func CampaignIDFromKey(key string) string {
	sum := sha256.Sum256([]byte("campaign|" + key))
	return CampaignIDPrefix + hex.EncodeToString(sum[:KeyHashLen])
}

// CampaignNotificationID is the notification id of one campaign recipient:
// derived from the campaign and the user alone, so every retry, replay or
// re-run of a batch names the same notification (and hits the same delivery
// guard rows). It has the shape of every notification id (n_ + 64 hex digits).
func CampaignNotificationID(tenantID, campaignID, userID string) string {
	sum := sha256.Sum256([]byte("campaign-recipient|" + tenantID + "|" + campaignID + "|" + userID))
	return NotificationIDPrefix + hex.EncodeToString(sum[:])
}
