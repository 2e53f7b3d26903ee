package templates

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// FCMMaxPayloadBytes is FCM's limit for a message's payload (notification
// and data together, for both notification and data messages).
const FCMMaxPayloadBytes = 4096

// ErrPushPayloadTooLarge matches *PushPayloadTooLargeError with errors.Is.
var ErrPushPayloadTooLarge = errors.New("push payload too large")

// PushPayloadTooLargeError is returned by Render when a rendered push exceeds
// FCMMaxPayloadBytes. Use errors.As to read the sizes, or
// errors.Is(err, ErrPushPayloadTooLarge).
type PushPayloadTooLargeError struct {
	Bytes int // PushPayloadSize of the rendered push
	Limit int // FCMMaxPayloadBytes
}

func (e *PushPayloadTooLargeError) Error() string {
	return fmt.Sprintf("push payload is %d bytes; FCM allows at most %d bytes (title, body and data together)", e.Bytes, e.Limit)
}

// Is makes errors.Is(err, ErrPushPayloadTooLarge) true.
func (e *PushPayloadTooLargeError) Is(target error) bool { return target == ErrPushPayloadTooLarge }

// PushPayloadSize is the size counted against FCMMaxPayloadBytes: the byte
// length of the compact JSON object
//
//	{"notification":{"title":T,"body":B},"data":{K:V,...}}
//
// (empty title/body/data omitted, UTF-8 unescaped). FCM documents the limit
// as applying to the keys and values of the notification and data payloads;
// counting the JSON encoding over-approximates that by the quotes, braces,
// separators and escapes, about 40 bytes plus 6 per data pair, so a payload
// accepted here is never rejected by FCM for size. APNs' own limit (4 KiB for
// alerts) is the same order, so FCM's is used for all push.
func PushPayloadSize(title, body string, data map[string]string) int {
	type notification struct {
		Title string `json:"title,omitempty"`
		Body  string `json:"body,omitempty"`
	}
	payload := struct {
		Notification *notification     `json:"notification,omitempty"`
		Data         map[string]string `json:"data,omitempty"`
	}{Data: data}
	if title != "" || body != "" {
		payload.Notification = &notification{Title: title, Body: body}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(payload); err != nil {
		// Strings and string maps always encode; be conservative anyway.
		return FCMMaxPayloadBytes + 1
	}
	return buf.Len() - 1 // Encode appends a newline
}
