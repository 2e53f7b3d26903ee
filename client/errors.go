package client

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Error is a non-2xx answer from Herald: its HTTP status and the error body
// `{"error": {"code", "message", "field"}}` every route answers with (a body that
// is not one, say from a proxy, leaves Code empty and Message its first bytes).
//
//	var herr *client.Error
//	if errors.As(err, &herr) && herr.Code == "unknown_user" { ... }
type Error struct {
	// Status is the HTTP status code.
	Status int
	// Code is Herald's stable machine-readable word (ErrorBodyErrorCode lists them).
	Code string
	// Message is for people.
	Message string
	// Field names the input the problem is tied to ("user_id", "steps[3].window",
	// "line 12"), or is empty.
	Field string
	// Problems are every problem found, with invalid_template (and invalid_field
	// for a preference document); Field and Message name the first.
	Problems []ValidationProblem
	// RetryAfter is the answer's Retry-After (429 and 503), or zero.
	RetryAfter time.Duration
	// RequestID is the X-Request-Id Herald logged the request under.
	RequestID string
	// Method and Path are the request's.
	Method, Path string
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "herald: %s %s: %d", e.Method, e.Path, e.Status)
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	if e.Field != "" {
		b.WriteString(" (" + e.Field + ")")
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	return b.String()
}

// errorFrom reads a non-2xx answer into an *Error.
func errorFrom(method, path string, resp *http.Response) *Error {
	e := &Error{Status: resp.StatusCode, Method: method, Path: path,
		RetryAfter: retryAfter(resp.Header.Get("Retry-After")), RequestID: resp.Header.Get("X-Request-Id")}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var body ErrorBody
	if err := json.Unmarshal(raw, &body); err == nil && body.Error.Code != "" {
		e.Code, e.Message = string(body.Error.Code), body.Error.Message
		if body.Error.Field != nil {
			e.Field = *body.Error.Field
		}
		e.Problems = body.Error.Errors
		return e
	}
	msg := strings.TrimSpace(string(raw))
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	e.Message = msg
	return e
}
